// Brown corpus loader: file discovery, tag stripping, whitespace normalisation, document split.
#include "mixlab/data/corpus.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mixlab/core/error.h"

namespace mixlab {

namespace fs = std::filesystem;

namespace {

/// Brown document file names: 'c', a genre letter a-r, two digits (e.g. "ca01").
bool is_brown_document(const std::string& name) {
  return name.size() == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
         std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3]));
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "validation"; }

std::string brown_normalize(const std::string& raw) {
  std::string out;
  out.reserve(raw.size() / 2);
  size_t i = 0;
  const size_t n = raw.size();
  while (i < n) {
    while (i < n && is_space(raw[i])) ++i;
    const size_t start = i;
    while (i < n && !is_space(raw[i])) ++i;
    if (start == i) break;
    // Token raw[start, i): drop the tag, i.e. everything from the last '/'.
    size_t end = i;
    for (size_t k = i; k > start; --k) {
      if (raw[k - 1] == '/') {
        end = k - 1;
        break;
      }
    }
    if (end == start) continue;  // a bare tag: nothing to keep
    if (!out.empty()) out.push_back(' ');
    out.append(raw, start, end - start);
  }
  return out;
}

Corpus Corpus::from_documents(std::vector<CorpusDocument> docs, const CorpusOptions& options) {
  MIXLAB_CHECK(options.validation_every >= 2, "Corpus: validation_every must be >= 2, got {}",
               options.validation_every);
  std::sort(docs.begin(), docs.end(), [](const CorpusDocument& a, const CorpusDocument& b) { return a.name < b.name; });
  Corpus c;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto& target = (static_cast<int64_t>(i) % options.validation_every == 0) ? c.validation_ : c.train_;
    target.push_back(std::move(docs[i]));
  }
  return c;
}

Corpus Corpus::load_brown(const std::string& dir, const CorpusOptions& options) {
  const fs::path root(dir);
  std::error_code ec;
  MIXLAB_CHECK(fs::exists(root, ec),
               "Corpus::load_brown: corpus folder '{}' does not exist (scripts/setup.sh installs "
               "the Brown corpus into data/brown; a small sample is in data/sample)",
               dir);
  MIXLAB_CHECK(fs::is_directory(root, ec), "Corpus::load_brown: '{}' is not a folder", dir);
  std::vector<CorpusDocument> docs;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !is_brown_document(name)) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    MIXLAB_CHECK(in.good(), "Corpus::load_brown: cannot read '{}'", entry.path().string());
    std::stringstream ss;
    ss << in.rdbuf();
    docs.push_back({name, brown_normalize(ss.str())});
  }
  MIXLAB_CHECK(!ec, "Corpus::load_brown: cannot list folder '{}': {}", dir, ec.message());
  MIXLAB_CHECK(!docs.empty(),
               "Corpus::load_brown: folder '{}' holds no Brown documents (files named like ca01: "
               "'c', a genre letter a-r, two digits)",
               dir);
  Corpus c = from_documents(std::move(docs), options);
  c.source_ = dir;
  return c;
}

int64_t Corpus::bytes(Split split) const {
  int64_t n = 0;
  for (const auto& d : documents(split)) n += static_cast<int64_t>(d.text.size());
  return n;
}

torch::Tensor Corpus::tokens(Split split) const {
  const auto& docs = documents(split);
  int64_t n = bytes(split) + (docs.empty() ? 0 : static_cast<int64_t>(docs.size()) - 1);
  auto out = torch::empty({n}, torch::kLong);
  auto* p = out.data_ptr<int64_t>();
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i > 0) *p++ = '\n';
    for (char ch : docs[i].text) *p++ = static_cast<unsigned char>(ch);
  }
  return out;
}

}  // namespace mixlab
