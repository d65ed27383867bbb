// Brokered credentials (issue 48), in real containers under the test runtime (runc, then runsc):
// the server ends a program's TLS for a host with a credential, with a CA of its own the sandbox
// trusts, verifies the host's certificate against the CA the test made (--egress-upstream-ca),
// and sets the header on every request; the program, searching its environment, its files,
// /proc and its own memory, finds no trace of the secret. The hosts are Python HTTPS servers on
// the host's loopback that record every request head they get in a file the test reads.

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"
#include "support/mcp_client.h"

namespace scs::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string randomHex(std::size_t digits) {
  std::random_device random;
  std::string out;
  while (out.size() < digits) {
    out += "0123456789abcdef"[random() % 16];
  }
  return out;
}

class CredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(engineProblem(), "");
    directory_ =
        std::filesystem::temp_directory_path() / ("scs-credentials-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
    const std::string d = directory_.string();
    // The hosts' CA and a certificate for api.test and upload.test; a stranger's self-signed
    // certificate for bad.test, which nothing trusts.
    const CommandResult made = runCommand(
        "cd " + d +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=scs-test-hosts-ca 2>&1 && openssl req -newkey rsa:2048 -nodes -keyout "
        "host.key -out host.csr -subj /CN=api.test 2>&1 && printf "
        "'subjectAltName=DNS:api.test,DNS:upload.test' > ext && openssl x509 -req -in host.csr "
        "-CA ca.pem -CAkey ca.key -CAcreateserial -out host.pem -days 2 -extfile ext 2>&1 && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout bad.key -out bad.pem -days 2 "
        "-subj /CN=bad.test -addext subjectAltName=DNS:bad.test 2>&1");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    // The secrets: a random tail that only this process and the server know.
    tail_ = randomHex(32);
    secret_ = "Bearer scs-test-secret-" + tail_;
    upload_tail_ = randomHex(32);
    {
      std::ofstream(d + "/api-secret") << secret_ << "\n";
      ::chmod((d + "/api-secret").c_str(), 0600);
      std::ofstream(d + "/bad-secret") << "Bearer never-sent\n";
      ::chmod((d + "/bad-secret").c_str(), 0600);
    }
    ::setenv("SCS_TEST_UPLOAD_TOKEN", ("scs-test-secret-" + upload_tail_).c_str(), 1);
    // Three HTTPS servers (api.test and upload.test share one; bad.test) and one plain HTTP
    // server; each request head is appended to heads.log, one JSON line each.
    upstream_ = std::make_unique<testing::McpProcess>(
        "/usr/bin/python3",
        std::vector<std::string>{
            "-I", "-c",
            "import http.server, json, ssl, sys, threading\n"
            "log = open(sys.argv[1] + '/heads.log', 'a')\n"
            "lock = threading.Lock()\n"
            "class Handler(http.server.BaseHTTPRequestHandler):\n"
            "    protocol_version = 'HTTP/1.1'\n"
            "    def answer(self):\n"
            "        length = int(self.headers.get('Content-Length') or 0)\n"
            "        body = self.rfile.read(length)\n"
            "        with lock:\n"
            "            log.write(json.dumps({'port': self.server.server_address[1],\n"
            "                'path': self.path, 'headers': self.headers.items(),\n"
            "                'body': len(body)}) + '\\n')\n"
            "            log.flush()\n"
            "        text = f'served {self.path}'.encode()\n"
            "        self.send_response(200)\n"
            "        self.send_header('Content-Length', str(len(text)))\n"
            "        self.end_headers()\n"
            "        self.wfile.write(text)\n"
            "    do_GET = do_POST = answer\n"
            "    def log_message(self, *args):\n"
            "        pass\n"
            "def serve(cert, key):\n"
            "    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)\n"
            "    if cert:\n"
            "        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "        context.load_cert_chain(sys.argv[1] + cert, sys.argv[1] + key)\n"
            "        server.socket = context.wrap_socket(server.socket, server_side=True)\n"
            "    threading.Thread(target=server.serve_forever, daemon=True).start()\n"
            "    return server.server_address[1]\n"
            "ports = [serve('/host.pem', '/host.key'), serve('/bad.pem', '/bad.key'),\n"
            "         serve(None, None)]\n"
            "print(*ports, flush=True)\n"
            "threading.Event().wait()\n",
            d});
    const std::optional<std::string> ports = upstream_->readLine(std::chrono::seconds(10));
    ASSERT_TRUE(ports) << upstream_->stderrText();
    std::istringstream words(*ports);
    words >> tls_port_ >> bad_port_ >> plain_port_;
    server_ = launchServer(
        {"--prepared",
         "0",
         "--egress-allow",
         "local=api.test:" + tls_port_,
         "--egress-allow",
         "local=upload.test:" + tls_port_,
         "--egress-allow",
         "local=bad.test:" + bad_port_,
         "--egress-allow",
         "local=plain.test:" + plain_port_,
         "--egress-resolve",
         "api.test=127.0.0.1",
         "--egress-resolve",
         "upload.test=127.0.0.1",
         "--egress-resolve",
         "bad.test=127.0.0.1",
         "--egress-resolve",
         "plain.test=127.0.0.1",
         "--egress-credential",
         "local=api.test:" + tls_port_ + ":Authorization=file:" + d + "/api-secret",
         "--egress-credential",
         "local=upload.test:" + tls_port_ + ":$UPLOAD_TOKEN@X-Token=env:SCS_TEST_UPLOAD_TOKEN",
         "--egress-credential",
         "local=bad.test:" + bad_port_ + ":Authorization=file:" + d + "/bad-secret",
         "--egress-upstream-ca",
         d + "/ca.pem"});
  }

  static void TearDownTestSuite() {
    if (server_) {
      server_->closeStdin();
      server_->waitExit(std::chrono::seconds(60));
    }
    server_.reset();
    upstream_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  static Poco::JSON::Object::Ptr run(const std::string& code,
                                     const std::string& language = "python") {
    const std::string prelude =
        language == "python"
            ? "TLS = " + tls_port_ + "\nBAD = " + bad_port_ + "\nPLAIN = " + plain_port_ + "\n"
            : "const TLS = " + tls_port_ + ";\n";
    Poco::JSON::Object::Ptr arguments = startRunArguments({prelude + code, {}, nullptr});
    arguments->set("language", language);
    return runToFinal(*server_, arguments);
  }

  // The request heads the hosts got since the last call, one JSON line each.
  static std::string newHeads() {
    std::ifstream in(directory_ / "heads.log");
    std::string all((std::istreambuf_iterator<char>(in)), {});
    std::string fresh = all.substr(std::min(all.size(), heads_read_));
    heads_read_ = all.size();
    return fresh;
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
  static inline std::string tls_port_, bad_port_, plain_port_;
  static inline std::string tail_, secret_, upload_tail_;
  static inline std::size_t heads_read_ = 0;
};

TEST_F(CredentialsTest, EveryRequestOfEachClientGetsTheHeaderTheProgramNeverHolds) {
  newHeads();
  const auto report = run(
      "import os, subprocess, urllib.request, requests\n"
      "with requests.Session() as s:\n"  // one kept-alive connection, three requests
      "    for n in range(3):\n"
      "        r = s.get(f'https://api.test:{TLS}/keep/{n}', headers={'Authorization': 'forged'},"
      " timeout=20)\n"
      "        print('requests', r.status_code, r.text)\n"
      "print('urllib', urllib.request.urlopen(f'https://api.test:{TLS}/urllib', timeout=20)"
      ".read().decode())\n"
      "r = subprocess.run(['curl', '-sS', f'https://api.test:{TLS}/curl'], capture_output=True,"
      " text=True)\n"
      "print('curl', r.stdout.strip(), r.stderr.strip())\n"
      "print('bundle', os.environ['SSL_CERT_FILE'] == os.environ['REQUESTS_CA_BUNDLE'])\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("requests 200 served /keep/0"));
  EXPECT_THAT(out, HasSubstr("requests 200 served /keep/2"));
  EXPECT_THAT(out, HasSubstr("urllib served /urllib"));
  EXPECT_THAT(out, HasSubstr("curl served /curl"));
  EXPECT_THAT(out, HasSubstr("bundle True"));
  const std::string heads = newHeads();
  // Five requests, each with the operator's header, and never the program's own.
  std::size_t with = 0;
  for (std::size_t at = 0;
       (at = heads.find("\"Authorization\", \"" + secret_ + "\"", at)) != std::string::npos; ++at) {
    ++with;
  }
  EXPECT_EQ(with, 5u) << heads;
  EXPECT_THAT(heads, Not(HasSubstr("forged")));
  const std::string network = networkOf(report);
  EXPECT_THAT(network, HasSubstr("added by the server to 5 requests")) << network;
  EXPECT_THAT(describe(report), Not(HasSubstr(tail_)));
}

TEST_F(CredentialsTest, ASessionsRunsGetItToo) {
  // A Python session's interpreter is running before its first run names egress: the CA and
  // the placeholder reach it with that run, and stay for the next.
  newHeads();
  const std::string session = openSession(*server_);
  const auto cell = [&](const std::string& code) {
    Poco::JSON::Object::Ptr arguments =
        startRunArguments({"TLS = " + tls_port_ + "\n" + code, {}, nullptr});
    arguments->set("session_id", session);
    return runToFinal(*server_, arguments);
  };
  const auto first = cell(
      "import requests\n"
      "s = requests.Session()\n"
      "print('first', s.get(f'https://api.test:{TLS}/cell1', timeout=20).text)\n");
  ASSERT_EQ(text(first, "status"), "succeeded") << describe(first);
  const auto second = cell(
      "import os\n"
      "print('second', s.get(f'https://upload.test:{TLS}/cell2', timeout=20,\n"
      "      headers={'X-Token': os.environ['UPLOAD_TOKEN']}).text)\n");
  ASSERT_EQ(text(second, "status"), "succeeded") << describe(second);
  EXPECT_THAT(stream(second, "stdout"), HasSubstr("second served /cell2"));
  closeSession(*server_, session);
  const std::string heads = newHeads();
  EXPECT_THAT(heads, HasSubstr(secret_));
  EXPECT_THAT(heads, HasSubstr("scs-test-secret-" + upload_tail_));
  EXPECT_THAT(networkOf(second), HasSubstr("added by the server to 1 request;"));
}

TEST_F(CredentialsTest, NodesFetchTrustsTheServersCaAndGetsTheHeader) {
  newHeads();
  const auto report =
      run("(async () => {\n"
          "  const r = await fetch(`https://api.test:${TLS}/node`);\n"
          "  console.log('fetch', r.status, await r.text());\n"
          "})();\n",
          "javascript");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  EXPECT_THAT(stream(report, "stdout"), HasSubstr("fetch 200 served /node"));
  EXPECT_THAT(newHeads(), HasSubstr(secret_));
}

TEST_F(CredentialsTest, TheProgramFindsNoTraceOfTheSecretAnywhereItCanLook) {
  // The program makes its requests, then searches what it can read for the secret's public
  // prefix and prints what follows each match; the random tail, which only the test and the
  // server know, must not be among them. Its own needle is built so that it is never followed
  // by the tail either.
  const auto report = run(
      "import os, re, requests\n"
      "requests.get(f'https://api.test:{TLS}/first', timeout=20)\n"
      "token = os.environ['UPLOAD_TOKEN']\n"
      "print('placeholder', token.startswith('scs-placeholder-'), len(token))\n"
      "requests.get(f'https://upload.test:{TLS}/upload', headers={'X-Token': token}, timeout=20)\n"
      "needle = 'scs-test-' + 'secret-'\n"
      "needle = needle.encode()\n"
      "found = set()\n"
      "def search(data, where):\n"
      "    for m in re.finditer(re.escape(needle), data):\n"
      "        found.add((where, data[m.end():m.end() + 12]))\n"
      "scanned = {'env': 0, 'files': 0, 'proc': 0, 'memory': 0}\n"
      "search('\\n'.join(f'{k}={v}' for k, v in os.environ.items()).encode(), 'env')\n"
      "scanned['env'] = len(os.environ)\n"
      "for top in ('/tmp', '/workspace', '/etc', '/home', '/root', '/var', '/run', '/opt',"
      " '/srv', '/dev/shm'):\n"
      "    for root, dirs, files in os.walk(top):\n"
      "        for name in files:\n"
      "            try:\n"
      "                with open(os.path.join(root, name), 'rb') as f:\n"
      "                    search(f.read(1 << 24), 'file ' + os.path.join(root, name))\n"
      "                scanned['files'] += 1\n"
      "            except OSError:\n"
      "                pass\n"
      "for pid in os.listdir('/proc'):\n"
      "    if pid.isdigit():\n"
      "        for part in ('environ', 'cmdline'):\n"
      "            try:\n"
      "                with open(f'/proc/{pid}/{part}', 'rb') as f:\n"
      "                    search(f.read(), f'proc {pid} {part}')\n"
      "                scanned['proc'] += 1\n"
      "            except OSError:\n"
      "                pass\n"
      "with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:\n"
      "    for line in maps:\n"
      "        span, perms = line.split()[:2]\n"
      "        if not perms.startswith('r') or '[vvar]' in line or '[vsyscall]' in line:\n"
      "            continue\n"
      "        start, end = (int(x, 16) for x in span.split('-'))\n"
      "        try:\n"
      "            mem.seek(start)\n"
      "            search(mem.read(end - start), 'memory')\n"
      "            scanned['memory'] += end - start\n"
      "        except (OSError, OverflowError, ValueError):\n"
      "            pass\n"
      "print('scanned', scanned['env'] > 0, scanned['files'] > 0, scanned['proc'] > 0,"
      " scanned['memory'] > 1 << 20)\n"
      "for where, after in sorted(found):\n"
      "    print('match', where, after)\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("placeholder True 48"));
  EXPECT_THAT(out, HasSubstr("scanned True True True True"));
  EXPECT_THAT(out, Not(HasSubstr(tail_.substr(0, 12))));
  EXPECT_THAT(out, Not(HasSubstr(upload_tail_.substr(0, 12))));
  // The hosts did get them: the header on api.test, the placeholder replaced on upload.test.
  const std::string heads = newHeads();
  EXPECT_THAT(heads, HasSubstr(secret_));
  EXPECT_THAT(heads, HasSubstr("\"X-Token\", \"scs-test-secret-" + upload_tail_ + "\""));
  EXPECT_THAT(heads, Not(HasSubstr("scs-placeholder-")));
}

TEST_F(CredentialsTest, APlaceholderSentToAnotherHostIsRefusedWithTheReason) {
  newHeads();
  const auto report =
      run("import os, requests\n"
          "token = os.environ['UPLOAD_TOKEN']\n"
          "for url, header in ((f'https://api.test:{TLS}/elsewhere', 'X-Token'),\n"
          "                    (f'http://plain.test:{PLAIN}/plain', 'X-Token'),\n"
          "                    (f'https://upload.test:{TLS}/echoed', 'Origin')):\n"
          "    try:\n"
          "        r = requests.get(url, headers={header: token}, timeout=20)\n"
          "        print('answer', r.status_code, r.headers.get('X-Proxy-Error'), r.text)\n"
          "    except requests.RequestException as e:\n"
          "        print('error', e)\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  // All three: another host's request, a plain one, and its own host's other header.
  std::size_t refused = 0;
  for (std::size_t at = 0; (at = out.find("answer 403 placeholder", at)) != std::string::npos;
       ++at) {
    ++refused;
  }
  EXPECT_EQ(refused, 3u) << "[" << out << "]" << describe(report);
  EXPECT_THAT(out, Not(HasSubstr("served /elsewhere")));
  EXPECT_THAT(out, Not(HasSubstr("served /plain")));
  // Its own host, but a header other than the one the operator named: the program does not
  // choose where the secret lands (a header the host might echo).
  EXPECT_THAT(out, Not(HasSubstr("served /echoed")));
  EXPECT_THAT(newHeads(), Not(HasSubstr("scs-placeholder-")));
  EXPECT_THAT(networkOf(report), HasSubstr("placeholder that belongs to another host"));
}

TEST_F(CredentialsTest, ARequestThatNamesAnotherHostOrMethodIsNotCarried) {
  // The connection goes to the vetted address whatever the request says; a front end there
  // could route by Host or an absolute target, so neither may name another host, and a TRACE
  // (which echoes the head, credential included) is not carried.
  newHeads();
  const auto report =
      run("import http.client, os, ssl\n"
          "context = ssl.create_default_context(cafile=os.environ['SSL_CERT_FILE'])\n"
          "for method, target, host in (('GET', '/', 'evil.test'),\n"
          "                             ('GET', 'https://evil.test/', f'api.test:{TLS}'),\n"
          "                             ('TRACE', '/', 'api.test')):\n"
          "    c = http.client.HTTPSConnection('127.0.0.1', 3128, context=context, timeout=20)\n"
          "    c.set_tunnel('api.test', TLS)\n"
          "    c.putrequest(method, target, skip_host=True)\n"
          "    c.putheader('Host', host)\n"
          "    c.endheaders()\n"
          "    r = c.getresponse()\n"
          "    print('answer', method, r.status, r.getheader('X-Proxy-Error'))\n"
          "    c.close()\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("answer GET 421 misdirected\nanswer GET 421 misdirected\n"));
  EXPECT_THAT(out, HasSubstr("answer TRACE 405"));
  EXPECT_EQ(newHeads(), "");
}

TEST_F(CredentialsTest, AHostWithABadCertificateFailsTheRequestWithTheReason) {
  newHeads();
  const auto report =
      run("import requests\n"
          "r = requests.get(f'https://bad.test:{BAD}/', timeout=20)\n"
          "print('answer', r.status_code, r.headers.get('X-Proxy-Error'), r.text)\n");
  ASSERT_EQ(text(report, "status"), "succeeded") << describe(report);
  const std::string out = stream(report, "stdout");
  EXPECT_THAT(out, HasSubstr("answer 502 upstream-tls"));
  EXPECT_THAT(out, HasSubstr("certificate"));
  EXPECT_EQ(newHeads(), "");  // the host never got a request, so never the credential
  EXPECT_THAT(networkOf(report), HasSubstr("the TLS connection to bad.test failed"));
}

}  // namespace
}  // namespace scs::integration
