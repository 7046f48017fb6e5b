// Prints, per form (NFD, NFKD), the code points vela's utf8proc normalization changes (input to
// gen_norm_exceptions.py). Build: g++ -std=c++20 -Isrc tools/tokenizer/utf8proc_changes.cpp
// src/tokenizer/{normalizer,unicode,regex}.cpp -lutf8proc -lpcre2-8
#include <cstdio>
#include <string>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"
int main() {
  for (int f : {1, 3}) {
    std::printf("%s", f == 1 ? "NFD" : "NFKD");
    for (uint32_t c = 0xA0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      std::string s = vela::unicode::to_utf8(c);
      if (vela::normalize_unicode(s, static_cast<vela::UnicodeForm>(f)) != s) std::printf(" %u", c);
    }
    std::printf("\n");
  }
}
