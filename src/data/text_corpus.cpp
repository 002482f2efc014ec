// A plain-text corpus: a folder of files or one file of blank-line separated documents
// (mixlab/data/text_corpus.h).
#include "mixlab/data/text_corpus.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mixlab/core/error.h"

namespace mixlab {

namespace fs = std::filesystem;

namespace {

std::string read_whole(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  MIXLAB_CHECK_IO(in.good(), "corpus file '{}': cannot open: {}", file.string(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  MIXLAB_CHECK_IO(!in.bad(), "corpus file '{}': read error", file.string());
  return ss.str();
}

bool is_line_break(char c) { return c == '\n' || c == '\r'; }

std::string trim_line_breaks(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_line_break(s[b])) ++b;
  while (e > b && is_line_break(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Text never holds NUL; a file that does is an image, an archive, UTF-16 ... not a corpus.
void check_text(const std::string& bytes, const std::string& what) {
  MIXLAB_CHECK(!bytes.empty(), "{} is empty (0 bytes): a corpus document needs text", what);
  const size_t nul = bytes.find('\0');
  MIXLAB_CHECK(nul == std::string::npos,
               "{} looks binary (a NUL byte at offset {}); a corpus holds text files (UTF-8 or single-byte text)", what,
               nul);
}

bool is_blank_line(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// Documents of one file: runs of non-blank lines.
std::vector<CorpusDocument> split_paragraphs(const std::string& text, const std::string& name) {
  std::vector<CorpusDocument> docs;
  std::string current;
  auto flush = [&] {
    std::string t = trim_line_breaks(current);
    if (!t.empty()) docs.push_back({fmt::format("{}#{:08d}", name, docs.size() + 1), std::move(t)});
    current.clear();
  };
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find('\n', i);
    const size_t next = end == std::string::npos ? text.size() : end + 1;
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + i, end - i);
    if (is_blank_line(line)) {
      flush();
    } else {
      current.append(text, i, next - i);
    }
    i = next;
  }
  flush();
  return docs;
}

bool hidden(const fs::path& relative) {
  return std::any_of(relative.begin(), relative.end(),
                     [](const fs::path& part) { return !part.empty() && part.string()[0] == '.'; });
}

}  // namespace

Corpus text_corpus_load(const std::string& path) {
  std::error_code ec;
  const fs::path root(path);
  MIXLAB_CHECK(!path.empty(), "corpus: the path is empty (give a folder of text files or one text file)");
  MIXLAB_CHECK(fs::exists(root, ec), "corpus '{}' does not exist (give a folder of text files or one text file)", path);
  std::vector<CorpusDocument> docs;
  if (fs::is_directory(root, ec)) {
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::path rel = it->path().lexically_relative(root);
      if (hidden(rel)) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      const std::string what = fmt::format("corpus file '{}'", it->path().string());
      const std::string bytes = read_whole(it->path());
      check_text(bytes, what);
      std::string text = trim_line_breaks(bytes);
      MIXLAB_CHECK(!text.empty(), "{} is empty (only line breaks): a corpus document needs text", what);
      docs.push_back({rel.generic_string(), std::move(text)});
    }
    MIXLAB_CHECK_IO(!ec, "corpus '{}': cannot list the folder: {}", path, ec.message());
    MIXLAB_CHECK(!docs.empty(), "corpus '{}' is a folder without any file (hidden files are skipped)", path);
  } else {
    const std::string what = fmt::format("corpus file '{}'", path);
    const std::string bytes = read_whole(root);
    check_text(bytes, what);
    docs = split_paragraphs(bytes, root.filename().string());
    MIXLAB_CHECK(!docs.empty(), "{} is empty (only blank lines): a corpus document needs text", what);
  }
  Corpus c = Corpus::from_documents(std::move(docs));
  c.set_source(path);
  return c;
}

}  // namespace mixlab
