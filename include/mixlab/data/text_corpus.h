// mixlab/data/text_corpus.h — any plain-text corpus as documents, for the `lm` task's corpus=PATH.
//
// PATH is either
//   a folder: every regular file below it (recursively; names starting with '.' are skipped,
//             files and folders alike) is one document, named by its path relative to PATH
//             ('/'-separated), so documents sort in path order;
//   a file:   documents are separated by blank lines (a line that is empty or holds only spaces,
//             tabs or '\r'); document k (1-based, file order) is named "<file name>#<k, 8 digits>"
//             so name order is file order. A line break inside a document is kept.
// A document's text is its bytes with leading and trailing line breaks removed; nothing else is
// changed (no tag stripping, no whitespace folding: that is Brown's format, corpus.h).
//
// The split (lm_dataset.h) is then by document number in name order, as for Brown: 80 / 10 / 10
// for train / valid / test, so a corpus needs >= 3 documents and a test document needs >= 3.
//
// Refused with a mixlab::Error naming the path: a PATH that does not exist; a folder without any
// file; an empty file (0 bytes, or only line breaks); a file holding a NUL byte ("binary", with
// its offset: text has none); a file that cannot be read (mixlab::IoError). Non-UTF-8 bytes are
// kept: the bytes tokeniser takes any byte, the gpt2 tokeniser refuses the document and names it
// with the byte offset (GPT-2's encoder works on Unicode text).
//
// Not supported: compressed files, encodings other than UTF-8/bytes, sub-document splits.
#pragma once

#include <string>

#include "mixlab/data/corpus.h"

namespace mixlab {

/// Loads the corpus at `path` (folder or file, above). source() is `path`.
Corpus text_corpus_load(const std::string& path);

}  // namespace mixlab
