// The `rml` tool's SHA-256 (examples/rml/sha256.hpp) against the test vectors of FIPS 180-2
// (appendix B: one block, two blocks, a million 'a') plus the empty message and the 896-bit
// message of the NIST examples; each is also fed in uneven pieces, so that block boundaries fall
// inside update() calls. Exits 1 and names the vector on a mismatch.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "sha256.hpp"

namespace {

int failures = 0;

void expect(std::string_view name, const std::string& message, std::string_view digest) {
  const std::string whole = rml_cli::sha256_hex(message.data(), message.size());
  if (whole != digest) {
    std::printf("FAIL %.*s: got %s, expected %.*s\n", static_cast<int>(name.size()), name.data(), whole.c_str(),
                static_cast<int>(digest.size()), digest.data());
    ++failures;
  }
  for (std::size_t piece : {1U, 3U, 55U, 63U, 64U, 65U}) {
    rml_cli::Sha256 hash;
    for (std::size_t at = 0; at < message.size(); at += piece)
      hash.update(message.data() + at, std::min(piece, message.size() - at));
    const std::string pieces = hash.hex();
    if (pieces != digest) {
      std::printf("FAIL %.*s in pieces of %zu: got %s\n", static_cast<int>(name.size()), name.data(), piece,
                  pieces.c_str());
      ++failures;
    }
  }
}

}  // namespace

int main() {
  expect("abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  expect("empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect("448-bit", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  expect("896-bit",
         "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopq"
         "rstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  expect("million a", std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  if (failures == 0) std::printf("sha256: 5 vectors ok\n");
  return failures == 0 ? 0 : 1;
}
