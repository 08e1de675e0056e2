// A JSON text written front to back: the reports of the PyTorch allocator are
// objects of numbers and a few names, which do not need a document model.
// The writer places the commas; the caller nests Begin and End correctly.
#ifndef STREAMPOOL_SRC_TORCH_JSON_WRITER_H_
#define STREAMPOOL_SRC_TORCH_JSON_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace streampool::internal::torch {

class JsonWriter {
 public:
  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  // The next member's name, inside an object.
  void Key(absl::string_view name) {
    Separate();
    AppendString(name);
    out_ += ':';
    after_key_ = true;
  }

  void Uint(uint64_t v) { Value(absl::StrCat(v)); }
  void Int(int64_t v) { Value(absl::StrCat(v)); }
  void Bool(bool v) { Value(v ? "true" : "false"); }
  void Null() { Value("null"); }
  void String(absl::string_view s) {
    Separate();
    AppendString(s);
  }

  // Shorthands for a member.
  void Field(absl::string_view name, uint64_t v) {
    Key(name);
    Uint(v);
  }
  void FieldString(absl::string_view name, absl::string_view s) {
    Key(name);
    String(s);
  }

  const std::string& text() const { return out_; }

 private:
  // A comma before every element but the first of its container, and none
  // between a key and its value.
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  void Open(char c) {
    Separate();
    out_ += c;
    first_.push_back(true);
  }
  void Close(char c) {
    first_.pop_back();
    out_ += c;
  }
  void Value(absl::string_view literal) {
    Separate();
    out_.append(literal.data(), literal.size());
  }
  void AppendString(absl::string_view s) {
    out_ += '"';
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out_ += escaped;
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace streampool::internal::torch

#endif  // STREAMPOOL_SRC_TORCH_JSON_WRITER_H_
