#include "mcp/tool_definitions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "egress/credentials.h"
#include "egress/host_policy.h"
#include "mcp/tools.h"
#include "support/json.h"

namespace scs::mcp {
namespace {

using scs::testing::compact;

ToolSettings settings() {
  ToolSettings tools;
  tools.defaults = {5, 600, 2, 256};
  tools.maxima = {16, 3600, 4, 256};
  tools.files.max_total_bytes = 10u << 20;
  tools.retention = std::chrono::seconds(90);
  return tools;
}

TEST(ToolDefinitionsTest, SettingsFillValuesAndWordsAndSharedSchemasAreInlined) {
  const auto tools = toolDefinitions(settings(), R"({
    "$defs": {"size": {"type": "integer", "maximum": "${max_total_bytes}"}},
    "tools": [{"name": "t", "$comment": "dropped",
               "description": ["Up to ${max_memory_gb} GB,", "kept for ${retention}."],
               "inputSchema": {"type": "object", "properties": {
                 "memory_gb": {"type": "number", "maximum": "${max_memory_gb}",
                               "default": "${default_memory_gb}"},
                 "size": {"$ref": "#/$defs/size"}}}}]})");
  EXPECT_EQ(compact(tools->getObject(0)),
            R"({"name":"t","description":"Up to 16 GB,\nkept for 90 seconds.",)"
            R"("inputSchema":{"type":"object","properties":{)"
            R"("memory_gb":{"type":"number","maximum":16,"default":5},)"
            R"("size":{"type":"integer","maximum":10485760}}}})");
}

TEST(ToolDefinitionsTest, AnUnknownSettingOrSchemaIsABug) {
  EXPECT_THROW(toolDefinitions(settings(), R"({"tools": [{"description": "${nope}"}]})"),
               std::logic_error);
  EXPECT_THROW(toolDefinitions(settings(), R"({"tools": [{"x": {"$ref": "#/$defs/none"}}]})"),
               std::logic_error);
  EXPECT_THROW(toolDefinitions(settings(), R"({"tools": [{"description": "a ${b"}]})"),
               std::logic_error);
}

TEST(ToolDefinitionsTest, TheEmbeddedDefinitionsNameEveryToolWithAllItsParts) {
  const auto tools = toolDefinitions(settings());
  ASSERT_GE(tools->size(), 3u);
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const auto tool = tools->getObject(i);
    for (const char* key :
         {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}) {
      EXPECT_TRUE(tool->has(key)) << i << " " << key;
    }
    EXPECT_EQ(compact(tool).find("${"), std::string::npos) << compact(tool);
    EXPECT_EQ(compact(tool).find("$ref"), std::string::npos);
  }
}

TEST(ToolDefinitionsTest, BytesAndDurationsReadAsWords) {
  EXPECT_EQ(formatBytes(10u << 20), "10 MiB");
  EXPECT_EQ(formatBytes(512u << 10), "512 KiB");
  EXPECT_EQ(formatBytes(1000), "1000 bytes");
  EXPECT_EQ(formatDuration(std::chrono::seconds(3600)), "1 hour");
  EXPECT_EQ(formatDuration(std::chrono::seconds(120)), "2 minutes");
  EXPECT_EQ(formatDuration(std::chrono::seconds(1)), "1 second");
}

}  // namespace
}  // namespace scs::mcp

namespace scs::mcp {
namespace {

std::string token(const char* name, bool* found) {
  *found = std::string(name) == "TOKEN";
  return "not-shown";
}

// Issue 48: the model is told which hosts get a credential and how to use a placeholder, never
// the value; another tenant is told nothing of them.
TEST(EgressSentenceTest, NamesTheBrokeredHostsAndPlaceholdersOfTheTenantOnly) {
  egress::EgressPolicy policy(nullptr);
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("alice=api.test")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("alice=keys.test")));
  ASSERT_TRUE(std::holds_alternative<bool>(policy.allow("bob=api.test")));
  egress::CredentialStore credentials(&token);
  ASSERT_TRUE(
      std::holds_alternative<Done>(credentials.add("alice=api.test:Authorization=env:TOKEN")));
  ASSERT_TRUE(
      std::holds_alternative<Done>(credentials.add("alice=keys.test:$KEY@X-Api-Key=env:TOKEN")));
  const std::string alice = egressSentence(&policy, "alice", &credentials);
  EXPECT_THAT(alice, ::testing::HasSubstr(
                         "The server adds credentials to HTTPS requests to api.test:443 "
                         "(Authorization set); keys.test:443 ($KEY holds a placeholder: use it in "
                         "the X-Api-Key header as the real value); the sandbox never holds them."));
  EXPECT_THAT(alice, ::testing::Not(::testing::HasSubstr("not-shown")));
  EXPECT_THAT(egressSentence(&policy, "bob", &credentials),
              ::testing::Not(::testing::HasSubstr("credential")));
  EXPECT_EQ(egressSentence(&policy, "carol", &credentials), "");
}

}  // namespace
}  // namespace scs::mcp
