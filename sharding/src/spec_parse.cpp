// parse_spec: PartitionSpecs written as Python tuples (partition_spec.hpp), a small
// recursive-descent reader over the text.
#include <string>
#include <string_view>

#include "cgemm/sharding/partition_spec.hpp"

namespace cgemm {

namespace {

class SpecReader {
 public:
  explicit SpecReader(std::string_view text) : text_(text) {}

  PartitionSpec read() {
    skip_spaces();
    // JAX's repr: PartitionSpec('dp', None); jax.sharding.PartitionSpec is imported as P.
    for (std::string_view prefix : {"PartitionSpec", "P"}) {
      if (text_.substr(pos_, prefix.size()) == prefix) {
        pos_ += prefix.size();
        skip_spaces();
        if (peek() != '(') fail("'(' after " + std::string(prefix));
        break;
      }
    }
    if (peek() == '\'' || peek() == '"') {  // a bare name: one entry
      PartitionSpec spec{SpecEntry::axis(read_name())};
      finish();
      return spec;
    }
    expect('(');
    // ('a') and ('a',) both read as the one entry 'a' here: a spec of one dim either way.
    PartitionSpec spec;
    skip_spaces();
    while (peek() != ')') {
      spec.push_back(read_entry());
      skip_spaces();
      if (peek() == ',') {
        ++pos_;
        skip_spaces();
      } else if (peek() != ')') {
        fail("',' or ')'");
      }
    }
    ++pos_;
    finish();
    return spec;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  [[noreturn]] void fail(const std::string& expected) const {
    const std::string found =
        pos_ < text_.size() ? "'" + std::string(1, text_[pos_]) + "'" : "the end";
    throw Error("partition spec \"" + std::string(text_) + "\": expected " + expected +
                " at offset " + std::to_string(pos_) + ", found " + found +
                " (write it as Python does, e.g. \"('dp', 'tpsp', None)\")");
  }

  void expect(char c) {
    skip_spaces();
    if (peek() != c) fail(std::string("'") + c + "'");
    ++pos_;
  }

  void finish() {
    skip_spaces();
    if (pos_ != text_.size()) fail("nothing after the spec");
  }

  std::string read_name() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("a quoted axis name");
    const size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) ++pos_;
    if (pos_ == text_.size()) fail(std::string("the closing ") + quote);
    if (pos_ == start) {
      --pos_;
      fail("a non-empty axis name");
    }
    return std::string(text_.substr(start, pos_++ - start));
  }

  SpecEntry read_entry() {
    if (text_.substr(pos_, 4) == "None") {
      pos_ += 4;
      return SpecEntry::none();
    }
    if (peek() != '(') return SpecEntry::axis(read_name());
    // A tuple of names; Python's ('a') without a comma is the name itself.
    ++pos_;
    skip_spaces();
    if (peek() == ')') fail("an axis name (an empty tuple is no entry: write None)");
    std::vector<std::string> names;
    bool comma = false;
    while (peek() != ')') {
      names.push_back(read_name());
      skip_spaces();
      comma = false;
      if (peek() == ',') {
        ++pos_;
        comma = true;
        skip_spaces();
      } else if (peek() != ')') {
        fail("',' or ')'");
      }
    }
    ++pos_;
    if (names.size() == 1 && !comma) return SpecEntry::axis(names[0]);
    return SpecEntry::tuple(std::move(names));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

PartitionSpec parse_spec(std::string_view text) { return SpecReader(text).read(); }

}  // namespace cgemm
