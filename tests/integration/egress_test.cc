// Egress by allow-list (issue 44), in real containers under the test runtime (runc, then runsc):
// programs reach the hosts the operator allowed through PID 1's relay and the server, with no
// network interface in the sandbox; everything else is refused at once, with the reason, both
// to the program and in the report's network part. The hosts are servers on the host's
// loopback that the test starts (plain HTTP, and HTTPS with a CA the test makes), reached
// through names --egress-resolve pins there.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/TemporaryFile.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "support/mcp_client.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EgressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(engineProblem(), "");
    directory_ = std::filesystem::temp_directory_path() /
                 ("scs-egress-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
    const std::string d = directory_.string();
    // A CA and a certificate for allowed.test, signed by it.
    const CommandResult made = runCommand(
        "cd " + d +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=scs-test-ca 2>&1 && openssl req -newkey rsa:2048 -nodes -keyout host.key "
        "-out host.csr -subj /CN=allowed.test 2>&1 && printf "
        "'subjectAltName=DNS:allowed.test,DNS:other.test' > ext && openssl x509 -req -in "
        "host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out host.pem -days 2 -extfile ext "
        "2>&1 && echo 'hello,world' > data.csv && head -c 8388608 /dev/urandom > big.bin");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    // One process serves plain HTTP and HTTPS on two ports the kernel picks.
    upstream_ = std::make_unique<testing::McpProcess>(
        "/usr/bin/python3",
        std::vector<std::string>{
            "-I", "-c",
            "import functools, hashlib, http.server, ssl, sys, threading\n"
            "class Handler(http.server.SimpleHTTPRequestHandler):\n"
            "    def do_POST(self):\n"  // an upload's sha256 and size
            "        body = self.rfile.read(int(self.headers['Content-Length']))\n"
            "        answer = f'{hashlib.sha256(body).hexdigest()} {len(body)}'.encode()\n"
            "        self.send_response(200)\n"
            "        self.send_header('Content-Length', str(len(answer)))\n"
            "        self.end_headers()\n"
            "        self.wfile.write(answer)\n"
            "handler = functools.partial(Handler, directory=sys.argv[1])\n"
            "plain = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)\n"
            "tls = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)\n"
            "context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "context.load_cert_chain(sys.argv[1] + '/host.pem', sys.argv[1] + '/host.key')\n"
            "tls.socket = context.wrap_socket(tls.socket, server_side=True)\n"
            "for server in (plain, tls):\n"
            "    threading.Thread(target=server.serve_forever, daemon=True).start()\n"
            "print(plain.server_address[1], tls.server_address[1], flush=True)\n"
            "threading.Event().wait()\n",
            d});
    const std::optional<std::string> ports = upstream_->readLine(std::chrono::seconds(10));
    ASSERT_TRUE(ports) << upstream_->stderrText();
    const auto space = ports->find(' ');
    plain_port_ = ports->substr(0, space);
    tls_port_ = ports->substr(space + 1);
    server_ = launchServer({"--prepared", "0", "--egress-allow", "local=allowed.test:" + plain_port_,
                            "--egress-allow", "local=allowed.test:" + tls_port_,
                            "--egress-allow", "local=other.test:" + tls_port_,
                            "--egress-resolve", "allowed.test=127.0.0.1",
                            "--egress-resolve", "other.test=127.0.0.1"});
  }

  static void TearDownTestSuite() {
    if (server_) {
      const int pid = server_->pid();
      server_->closeStdin();
      server_->waitExit(std::chrono::seconds(60));
      // Nothing left running: the server's sandboxes went with it.
      EXPECT_TRUE(containersWithLabel("io.scs.owner-pid=" + std::to_string(pid)).empty());
    }
    server_.reset();
    upstream_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  // A Python run with the test CA at /workspace/ca.pem.
  static Poco::JSON::Object::Ptr run(const std::string& code) {
    Poco::JSON::Array::Ptr files = new Poco::JSON::Array;
    Poco::JSON::Object::Ptr ca = new Poco::JSON::Object;
    std::ifstream in(directory_ / "ca.pem");
    ca->set("path", "ca.pem");
    ca->set("content", std::string(std::istreambuf_iterator<char>(in), {}));
    files->add(ca);
    std::string prelude = "PLAIN = " + plain_port_ + "\nTLS = " + tls_port_ + "\n";
    return runToFinal(*server_, startRunArguments({prelude + code, {}, files}));
  }

  static std::string networkOf(const Poco::JSON::Object::Ptr& report) {
    const Poco::JSON::Object::Ptr network = report->getObject("network");
    if (!network) {
      return "";
    }
    std::ostringstream text;
    network->stringify(text);
    return text.str();
  }

  static inline std::filesystem::path directory_;
  static inline std::unique_ptr<testing::McpProcess> upstream_;
  static inline std::unique_ptr<testing::McpProcess> server_;
  static inline std::string plain_port_;
  static inline std::string tls_port_;
};

TEST_F(EgressTest, UrllibRequestsAndCurlReachTheAllowedHostsThroughTheProxy) {
  const auto report = run(
      "import os, subprocess, urllib.request, ssl, requests\n"
      "print('proxy', os.environ['HTTPS_PROXY'], os.environ['ALL_PROXY'])\n"
      "print('urllib', urllib.request.urlopen(f'http://allowed.test:{PLAIN}/data.csv',"
      " timeout=20).read())\n"
      "context = ssl.create_default_context(cafile='ca.pem')\n"
      "print('tls', urllib.request.urlopen(f'https://allowed.test:{TLS}/data.csv',"
      " timeout=20, context=context).read())\n"
      "print('requests', requests.get(f'https://allowed.test:{TLS}/data.csv', verify='ca.pem',"
      " timeout=20).text)\n"
      "r = subprocess.run(['curl', '-sS', '--cacert', 'ca.pem', "
      "f'https://allowed.test:{TLS}/data.csv'], capture_output=True, text=True)\n"
      "print('curl', r.stdout.strip(), r.stderr.strip())\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("proxy http://127.0.0.1:3128 socks5h://127.0.0.1:3128"));
  EXPECT_THAT(out, HasSubstr("urllib b'hello,world\\n'"));
  EXPECT_THAT(out, HasSubstr("tls b'hello,world\\n'"));
  EXPECT_THAT(out, HasSubstr("requests hello,world"));
  EXPECT_THAT(out, HasSubstr("curl hello,world"));
  EXPECT_THAT(networkOf(report), HasSubstr("\"allowed.test:" + tls_port_ + "\""));
  EXPECT_THAT(networkOf(report), HasSubstr("\"allowed.test:" + plain_port_ + "\""));
}

TEST_F(EgressTest, NodesFetchAndHttpUseTheProxyUnchanged) {
  Poco::JSON::Object::Ptr arguments = startRunArguments(
      {"const port = " + plain_port_ + ";\n"
       "(async () => {\n"
       "  const r = await fetch(`http://allowed.test:${port}/data.csv`);\n"
       "  console.log('fetch', r.status, (await r.text()).trim());\n"
       "  await new Promise(done => require('node:http').get(\n"
       "    `http://allowed.test:${port}/data.csv`, res => {\n"
       "      let body = ''; res.on('data', d => body += d);\n"
       "      res.on('end', () => { console.log('http', res.statusCode, body.trim()); done(); });\n"
       "    }));\n"
       "  try {\n"
       "    await fetch(`http://elsewhere.test:${port}/`);\n"
       "  } catch (e) {\n"  // undici tunnels http:// too: the CONNECT's 403 is the cause
       "    console.log('refused', String(e.cause && e.cause.message));\n"
       "  }\n"
       "})();\n",
       {}, nullptr});
  arguments->set("language", "javascript");
  const auto report = runToFinal(*server_, arguments);
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("fetch 200 hello,world"));
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("http 200 hello,world"));
  // undici reports the refused tunnel only as cancelled; the report says why.
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("\nrefused "));
  EXPECT_THAT(networkOf(report), HasSubstr("elsewhere.test:" + plain_port_ +
                                           " is not on this server's allow-list"));
  EXPECT_EQ(stream(report, "stderr"), "");
}

TEST_F(EgressTest, EverythingElseIsRefusedAtOnceWithTheReason) {
  const auto report = run(
      "import socket, ssl, time, urllib.request, urllib.error\n"
      "def get(url):\n"
      "    started = time.monotonic()\n"
      "    try:\n"
      "        urllib.request.urlopen(url, timeout=20)\n"
      "        return 'reached'\n"
      "    except urllib.error.HTTPError as e:\n"
      "        return f'{e.code} {e.read().decode().strip()}'\n"
      "    except OSError as e:\n"
      "        return f'error {e}'\n"
      "print('host', get(f'http://elsewhere.test:{PLAIN}/'))\n"
      "print('port', get('http://allowed.test:1/'))\n"
      "print('literal', get(f'http://93.184.216.34:{PLAIN}/'))\n"
      "print('metadata', get('http://169.254.169.254/latest/meta-data/'))\n"
      "started = time.monotonic()\n"
      "try:\n"
      "    socket.create_connection(('93.184.216.34', 443), timeout=20)\n"
      "    print('direct reached')\n"
      "except OSError as e:\n"
      "    print('direct', e.errno, round(time.monotonic() - started, 1) < 5)\n"
      "try:\n"
      "    socket.getaddrinfo('allowed.test', 443)\n"
      "    print('dns resolved')\n"
      "except OSError as e:\n"
      "    print('dns refused')\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("host 403 elsewhere.test:" + plain_port_ +
                             " is not on this server's allow-list"));
  EXPECT_THAT(out, HasSubstr("port 403 allowed.test:1 is not on this server's allow-list"));
  // An IP literal matches only an address entry (the sandbox's own loopback is NO_PROXY).
  EXPECT_THAT(out, HasSubstr("literal 403 93.184.216.34:" + plain_port_));
  EXPECT_THAT(out, HasSubstr("metadata 403"));
  // At once: ENETUNREACH under runc; gVisor's netstack, with no route either, says
  // EHOSTUNREACH.
  EXPECT_THAT(out, HasSubstr(underGvisor() ? "direct 113 True" : "direct 101 True"));
  EXPECT_THAT(out, HasSubstr("dns refused"));       // no resolver inside the sandbox
  const std::string network = networkOf(report);
  EXPECT_THAT(network, HasSubstr("elsewhere.test:" + plain_port_));
  EXPECT_THAT(network, HasSubstr("169.254.169.254:80"));
  EXPECT_THAT(network, Not(HasSubstr("\"reached\"")));
}

TEST_F(EgressTest, ATlsServerNameOtherThanTheConnectHostIsCut) {
  // CONNECT names allowed.test; the ClientHello asks for other.test (which the certificate
  // covers, and the policy allows on its own): the tunnel is cut, whatever the certificate says.
  const auto report = run(
      "import socket, ssl\n"
      "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "s.sendall(f'CONNECT allowed.test:{TLS} HTTP/1.1\\r\\n\\r\\n'.encode())\n"
      "print('tunnel', s.recv(4096).split(b'\\r\\n')[0].decode())\n"
      "context = ssl.create_default_context(cafile='ca.pem')\n"
      "try:\n"
      "    context.wrap_socket(s, server_hostname='other.test').sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
      "    print('tls reached')\n"
      "except OSError as e:\n"
      "    print('tls cut')\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("tunnel HTTP/1.1 200 Connection established"));
  EXPECT_THAT(out, HasSubstr("tls cut"));
  EXPECT_THAT(networkOf(report), HasSubstr("other.test"));
}

TEST_F(EgressTest, EightMiBDownAndUpArriveWholeBesideOutput) {
  const auto report = run(
      "import hashlib, threading, urllib.request\n"
      "done = threading.Event()\n"
      "def talk():\n"
      "    n = 0\n"
      "    while not done.is_set():\n"
      "        print('tick', n, flush=True); n += 1\n"
      "threading.Thread(target=talk, daemon=True).start()\n"
      "data = urllib.request.urlopen(f'http://allowed.test:{PLAIN}/big.bin', timeout=60).read()\n"
      "done.set()\n"
      "print('sha', hashlib.sha256(data).hexdigest(), len(data))\n"
      "import concurrent.futures\n"
      "with concurrent.futures.ThreadPoolExecutor(8) as pool:\n"
      "    sizes = list(pool.map(lambda _: len(urllib.request.urlopen("
      "f'http://allowed.test:{PLAIN}/data.csv', timeout=60).read()), range(8)))\n"
      "print('eight', sizes)\n"
      "upload = bytes(range(256)) * 32768\n"  // 8 MiB up
      "answer = urllib.request.urlopen(urllib.request.Request("
      "f'http://allowed.test:{PLAIN}/up', data=upload), timeout=60).read().decode()\n"
      "print('upload', answer == f'{hashlib.sha256(upload).hexdigest()} {len(upload)}')\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const CommandResult sha = runCommand("sha256sum " + (directory_ / "big.bin").string());
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("sha " + sha.output.substr(0, 64) + " 8388608"));
  EXPECT_THAT(out, HasSubstr("eight [12, 12, 12, 12, 12, 12, 12, 12]"));
  EXPECT_THAT(out, HasSubstr("tick 0"));
  EXPECT_THAT(out, HasSubstr("upload True"));
}

TEST_F(EgressTest, ASessionsRunsEachReportTheirOwnNetwork) {
  const std::string session = openSession(*server_);
  Poco::JSON::Object::Ptr first = startRunArguments(
      {"import urllib.request\nPLAIN = " + plain_port_ +
           "\nprint(urllib.request.urlopen(f'http://allowed.test:{PLAIN}/data.csv').read())\n",
       {}, nullptr});
  first->set("session_id", session);
  const auto one = runToFinal(*server_, first);
  ASSERT_EQ(text(one, "status"), "succeeded") << describe(one);
  EXPECT_THAT(stream(one, "stdout"), HasSubstr("hello,world"));
  EXPECT_THAT(networkOf(one), HasSubstr("allowed.test:" + plain_port_));
  Poco::JSON::Object::Ptr second = startRunArguments({"print('no network')\n", {}, nullptr});
  second->set("session_id", session);
  const auto two = runToFinal(*server_, second);
  ASSERT_EQ(text(two, "status"), "succeeded") << describe(two);
  EXPECT_EQ(networkOf(two), "");
  closeSession(*server_, session);
}

TEST(EgressOffTest, WithoutAPolicyThereIsNoRelayAndNoProxyVariable) {
  ASSERT_EQ(engineProblem(), "");
  auto server = launchServer({"--prepared", "0"});
  const auto report = runToFinal(
      *server, startRunArguments({"import os, socket\n"
                                  "print('vars', [k for k in os.environ if 'PROXY' in k.upper()])\n"
                                  "try:\n"
                                  "    socket.create_connection(('127.0.0.1', 3128), timeout=5)\n"
                                  "    print('relay there')\n"
                                  "except OSError as e:\n"
                                  "    print('relay', e.errno)\n",
                                  {}, nullptr}));
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("vars []"));
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("relay 111"));  // ECONNREFUSED: nothing listens
  EXPECT_FALSE(report->has("network"));
  // Ended by stdin's EOF, which removes its sandboxes (a killed server would leave its last
  // run's, which the engine-restart test, run after this one, waits for in vain).
  const int pid = server->pid();
  server->closeStdin();
  EXPECT_TRUE(server->waitExit(std::chrono::seconds(60)).has_value());
  EXPECT_TRUE(containersWithLabel("io.scs.owner-pid=" + std::to_string(pid)).empty());
}

}  // namespace
}  // namespace scs::integration
