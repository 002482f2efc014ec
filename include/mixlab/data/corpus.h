// mixlab/data/corpus.h — the Brown corpus as byte-level text, split into train/validation by document.
//
// Input: a folder in the Brown corpus' tagged form C (installed by scripts/setup.sh into
// data/brown/; a five-document sample ships in data/sample/). Documents are the files named
// c[a-r][0-9][0-9] (e.g. ca01); README, CONTENTS, cats.txt and anything else are ignored.
// Raw text is whitespace-separated `word/tag` tokens ("The/at jury/nn said/vbd").
//
// Normalisation: each token loses its tag (everything from its last '/'; a token without '/' is
// kept whole; a token that is only a tag, e.g. "/cd", becomes empty and is dropped), and the words
// of a document are joined with single spaces (paragraph breaks, tabs and newlines become one
// space; no leading/trailing space). Bytes are kept as they are.
//
// Tokens: bytes, vocabulary 256 (token id = unsigned byte value).
// Split: documents sorted by name; document number i (0-based) goes to validation when
// i % validation_every == 0, else to train — deterministic, and every corpus of >= 2 documents has
// both splits.
//
// Other plain-text corpora: mixlab/data/text_corpus.h.
// Not supported: other corpora formats, sub-document splits, tokenisers other than bytes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

enum class Split { kTrain, kValidation };

/// "train" / "validation".
const char* split_name(Split split);

struct CorpusDocument {
  std::string name;  // file name, e.g. "ca01"
  std::string text;  // normalised text (bytes)
};

struct CorpusOptions {
  int64_t validation_every = 10;  // document i goes to validation when i % validation_every == 0
};

class Corpus {
 public:
  static constexpr int64_t kVocabSize = 256;

  /// Loads every c[a-r][0-9][0-9] file of `dir`. Throws mixlab::Error naming the path when the
  /// folder does not exist, is not a folder, holds no such file, a file cannot be read, or
  /// validation_every < 2.
  static Corpus load_brown(const std::string& dir, const CorpusOptions& options = {});

  /// Builds a corpus from already normalised documents (tests, other sources); same split rule.
  static Corpus from_documents(std::vector<CorpusDocument> docs, const CorpusOptions& options = {});

  /// Documents of one split, in name order.
  const std::vector<CorpusDocument>& documents(Split split) const {
    return split == Split::kTrain ? train_ : validation_;
  }
  /// Total bytes of a split's documents.
  int64_t bytes(Split split) const;
  /// All documents of a split as one int64 tensor (N) of byte tokens, documents separated by one
  /// '\n' (byte 10, which normalised text never contains).
  torch::Tensor tokens(Split split) const;
  const std::string& source() const { return source_; }
  /// Where the documents came from (a path), for error messages.
  void set_source(std::string source) { source_ = std::move(source); }

 private:
  std::string source_;
  std::vector<CorpusDocument> train_, validation_;
};

/// Normalises one raw Brown document (tags stripped, whitespace collapsed), see the file header.
std::string brown_normalize(const std::string& raw);

}  // namespace mixlab
