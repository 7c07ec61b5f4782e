// The MessagePack wire under the serial layer, through msgpack-cxx: the output buffer that its
// packer writes into, and a token stream that its parse-with-visitor API fills for the reader.
// rml encodes and decodes no MessagePack itself, with two exceptions named where they are: floats
// are written as float32/float64 always (msgpack-cxx packs an integral float as an integer, which
// would change the format and lose -0.0), and a truncated string or blob header is read for the
// error message only.
#pragma once

// rml never needs Boost: msgpack-cxx without its Boost adaptors, in every integration.
#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// Only the packer and the parse-with-visitor API (which needs unpack.hpp's parser state):
// <msgpack.hpp> would also bring msgpack::object, zones, x3 and every adaptor, which rml does not
// use, at about twice the compile time. The order matters.
#include <msgpack/null_visitor.hpp>
#include <msgpack/pack.hpp>
#include <msgpack/unpack.hpp>

#include <msgpack/parse.hpp>

namespace rml::detail {

// ---- writing ----

/// The stream msgpack::packer writes into: a growing byte vector whose write() is inlined and
/// amortised (one capacity test, then a copy). Small copies (names, ops, headers) are done with a few
/// fixed-size moves instead of a call to memcpy.
class OutputBuffer {
 public:
  explicit OutputBuffer(std::size_t capacity) {
    buf_.reserve(capacity);
    pos_ = end_ = buf_.data();
  }
  /// Writes over `buffer` from its start, keeping its capacity: the bytes it already holds are
  /// overwritten in place, so a buffer reused document after document costs neither zero-filling nor
  /// page faults. Reserves `capacity` bytes when it holds fewer.
  OutputBuffer(std::vector<std::uint8_t>&& buffer, std::size_t capacity) : buf_(std::move(buffer)) {
    if (buf_.capacity() < capacity) buf_.reserve(capacity);
    pos_ = buf_.data();
    end_ = buf_.data() + buf_.size();
  }
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  [[gnu::always_inline]] void write(const char* data, std::size_t n) {
    if (static_cast<std::size_t>(end_ - pos_) < n) [[unlikely]]
      grow(n);
    if (n <= 32) [[likely]]
      copy_short(pos_, data, n);
    else
      std::memcpy(pos_, data, n);
    pos_ += n;
  }

  /// The bytes written; the buffer is spent.
  std::vector<std::uint8_t> take() && {
    buf_.resize(size());
    return std::move(buf_);
  }
  std::size_t size() const noexcept { return static_cast<std::size_t>(pos_ - buf_.data()); }

 private:
  // Copies n <= 32 bytes with two overlapping fixed-size moves. Reads and writes only
  // [src, src + n) and [dst, dst + n).
  [[gnu::always_inline]] static void copy_short(std::uint8_t* dst, const char* src, std::size_t n) {
    const auto move = [&]<std::size_t W>(std::size_t at) { std::memcpy(dst + at, src + at, W); };
    if (n >= 16) {
      move.template operator()<16>(0);
      move.template operator()<16>(n - 16);
    } else if (n >= 8) {
      move.template operator()<8>(0);
      move.template operator()<8>(n - 8);
    } else if (n >= 4) {
      move.template operator()<4>(0);
      move.template operator()<4>(n - 4);
    } else if (n > 0) {
      dst[0] = static_cast<std::uint8_t>(src[0]);
      dst[n / 2] = static_cast<std::uint8_t>(src[n / 2]);
      dst[n - 1] = static_cast<std::uint8_t>(src[n - 1]);
    }
  }
  // Room for n more bytes. The capacity grows geometrically, the size (which std::vector
  // zero-fills) only a step at a time, just ahead of the writing: capacity never written costs no
  // memset and no page faults.
  [[gnu::noinline]] void grow(std::size_t n) {
    const std::size_t step = std::clamp<std::size_t>(buf_.capacity() / 4, 256, 16 * 1024);
    const std::size_t used = size();
    const std::size_t want = used + std::max(n, step);
    if (want > buf_.capacity()) buf_.reserve(std::max(want, 2 * buf_.capacity()));
    buf_.resize(std::min(buf_.capacity(), std::max(want, buf_.size() + step)));
    pos_ = buf_.data() + used;
    end_ = buf_.data() + buf_.size();
  }

  std::vector<std::uint8_t> buf_;
  std::uint8_t* pos_ = nullptr;  // the next byte to write, in buf_
  std::uint8_t* end_ = nullptr;  // buf_'s end
};

// ---- reading ----

/// One MessagePack item as msgpack-cxx's parser reports it. Containers are only their headers: the
/// items inside follow as further tokens (the reader knows the counts, so no end tokens are kept).
struct Token {
  enum Kind : std::uint8_t {
    nil,
    boolean,  // v: 0 or 1
    uint,     // v: the value
    nint,     // v: the negative value's bits (int64)
    f32,      // v: the float's bits
    f64,      // v: the double's bits
    str,      // v: offset of the bytes in the document, n: their count
    bin,      // likewise
    ext,      // likewise (type byte and data)
    array,    // n: the count, v: a lower bound of the header's offset
    map,      // likewise
    end,      // no further item: n = 0 at the document's end, 1 when it ends inside an item
    invalid,  // malformed input: v = its offset (n = 1 when msgpack-cxx threw)
  };
  std::uint64_t v;
  std::uint32_t n;
  Kind kind;
};

/// The document as tokens, parsed by msgpack::v3::parse (msgpack-cxx's parse-with-visitor API, which
/// returns whether a whole item was parsed and throws only on an allocation failure or an extension
/// size it cannot hold; both are caught) a chunk at a time: the visitor stops the
/// parse when the chunk is full, and the next chunk starts a fresh parse at the next item (the
/// reader, not the parser, follows the nesting). So memory stays one chunk whatever the input, and
/// msgpack-cxx's own stack stays shallow however deep the nesting.
class TokenStream {
 public:
  static constexpr std::size_t chunk = 1024;

  explicit TokenStream(const std::uint8_t* data, std::size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size), tokens_(new Token[chunk]) {}

  [[gnu::always_inline]] const Token& peek() {
    if (cur_ == count_) [[unlikely]]
      fill();
    return tokens_[cur_];
  }
  /// Past the token peek() returned.
  [[gnu::always_inline]] void advance() noexcept { ++cur_; }
  /// The position of the next token among all tokens (for error offsets).
  std::uint64_t index() const noexcept { return base_ + cur_; }
  std::size_t size() const noexcept { return size_; }
  const char* data() const noexcept { return data_; }
  /// The reason msgpack-cxx threw, when an `invalid` token says it did.
  const std::string& exception() const noexcept { return exception_; }

  /// The byte offset where token `k` begins: parses again from the start, stopping after token k - 1
  /// (a stopped parse reports the offset of that token's last byte). Only for error messages.
  [[gnu::cold]] std::size_t offset_of(std::uint64_t k) const {
    if (k == 0) return 0;
    Counter counter{k};
    std::size_t off = 0;
    while (off < size_) {
      std::size_t at = off;
      bool done = false;
      try {
        done = msgpack::v3::parse(data_, size_, at, counter);
      } catch (const std::exception&) {
        return at;
      }
      if (counter.left == 0) return at + 1;  // stopped after token k - 1
      if (!done) return at;                  // malformed or truncated: token k begins there
      off = at;
    }
    return size_;
  }

 private:
  // Records tokens into [out, cap); stops the parse when the chunk is full. `lb` is a lower bound of
  // the offset of the next item: exact after a string or blob, else advanced by each item's least size.
  struct Recorder : msgpack::null_visitor {
    Token* out;
    Token* cap;
    const char* base;
    std::uint64_t lb;
    std::size_t error_offset = 0;
    bool full = false;       // the visitor stopped the parse
    bool malformed = false;  // msgpack-cxx reported a parse error

    [[gnu::always_inline]] bool push(Token::Kind kind, std::uint64_t v, std::uint32_t n = 0) {
      *out++ = Token{v, n, kind};
      full = out == cap;
      return !full;
    }
    bool visit_nil() {
      lb += 1;
      return push(Token::nil, 0);
    }
    bool visit_boolean(bool b) {
      lb += 1;
      return push(Token::boolean, b ? 1 : 0);
    }
    bool visit_positive_integer(std::uint64_t v) {
      lb += 1;
      return push(Token::uint, v);
    }
    bool visit_negative_integer(std::int64_t v) {  // msgpack-cxx reports every int8..int64 here
      lb += 1;
      return v >= 0 ? push(Token::uint, static_cast<std::uint64_t>(v))
                    : push(Token::nint, static_cast<std::uint64_t>(v));
    }
    bool visit_float32(float f) {
      lb += 5;
      return push(Token::f32, std::bit_cast<std::uint32_t>(f));
    }
    bool visit_float64(double d) {
      lb += 9;
      return push(Token::f64, std::bit_cast<std::uint64_t>(d));
    }
    [[gnu::always_inline]] bool bytes(Token::Kind kind, const char* p, std::uint32_t n) {
      if (n == 0) {
        lb += 1;
        return push(kind, 0, 0);
      }
      const auto at = static_cast<std::uint64_t>(p - base);
      lb = at + n;
      return push(kind, at, n);
    }
    bool visit_str(const char* p, std::uint32_t n) { return bytes(Token::str, p, n); }
    bool visit_bin(const char* p, std::uint32_t n) { return bytes(Token::bin, p, n); }
    bool visit_ext(const char* p, std::uint32_t n) { return bytes(Token::ext, p, n); }
    bool start_array(std::uint32_t n) {
      const std::uint64_t at = lb;
      lb += 1;
      return push(Token::array, at, n);
    }
    bool start_map(std::uint32_t n) {
      const std::uint64_t at = lb;
      lb += 1;
      return push(Token::map, at, n);
    }
    void parse_error(std::size_t /*parsed_offset*/, std::size_t offset) {  // `offset`: the bad byte
      malformed = true;
      error_offset = offset;
    }
    void insufficient_bytes(std::size_t, std::size_t) {}
  };

  // Counts the tokens a Recorder would record; stops after the k-th.
  struct Counter : msgpack::null_visitor {
    std::uint64_t left;
    explicit Counter(std::uint64_t k) : left(k) {}
    bool one() { return --left != 0; }
    bool visit_nil() { return one(); }
    bool visit_boolean(bool) { return one(); }
    bool visit_positive_integer(std::uint64_t) { return one(); }
    bool visit_negative_integer(std::int64_t) { return one(); }
    bool visit_float32(float) { return one(); }
    bool visit_float64(double) { return one(); }
    bool visit_str(const char*, std::uint32_t) { return one(); }
    bool visit_bin(const char*, std::uint32_t) { return one(); }
    bool visit_ext(const char*, std::uint32_t) { return one(); }
    bool start_array(std::uint32_t) { return one(); }
    bool start_map(std::uint32_t) { return one(); }
    void parse_error(std::size_t, std::size_t) {}
    void insufficient_bytes(std::size_t, std::size_t) {}
  };

  // Parses the next chunk of tokens. After the document's last item the stream holds an `end`
  // token; after malformed input, an `invalid` one (and nothing more is parsed).
  [[gnu::noinline]] void fill() {
    base_ += count_;
    cur_ = 0;
    Recorder rec;
    rec.out = tokens_.get();
    rec.cap = tokens_.get() + chunk;
    rec.base = data_;
    while (rec.out != rec.cap) {
      if (stopped_ || off_ >= size_) {
        rec.push(stopped_ ? last_.kind : Token::end, stopped_ ? last_.v : off_, stopped_ ? last_.n : 0);
        break;
      }
      rec.lb = off_;
      std::size_t at = off_;
      bool done = false;
      rec.malformed = false;
      try {
        done = msgpack::v3::parse(data_, size_, at, rec);
      } catch (const std::exception& e) {
        exception_ = e.what();
        stop({off_, 1, Token::invalid}, rec);
        break;
      }
      if (done) {  // one whole item (and all it holds) parsed; the next starts at `at`
        off_ = at;
      } else if (rec.full) {  // the chunk is full; `at` is the last token's last byte
        off_ = at + 1;
      } else if (rec.malformed) {
        stop({rec.error_offset, 0, Token::invalid}, rec);
      } else {  // the input ends inside an item
        stop({size_, 1, Token::end}, rec);
      }
    }
    count_ = static_cast<std::size_t>(rec.out - tokens_.get());
  }
  void stop(const Token& last, Recorder& rec) {
    stopped_ = true;
    last_ = last;
    if (rec.out != rec.cap) rec.push(last.kind, last.v, last.n);
  }

  const char* data_;
  std::size_t size_;
  std::unique_ptr<Token[]> tokens_;
  std::size_t cur_ = 0;     // the next token, in tokens_
  std::size_t count_ = 0;   // tokens in tokens_
  std::uint64_t base_ = 0;  // the index of tokens_[0] among all tokens
  std::size_t off_ = 0;     // where the next parse starts
  bool stopped_ = false;    // an `end` inside an item or an `invalid` token was reached
  Token last_{};
  std::string exception_;
};

}  // namespace rml::detail
