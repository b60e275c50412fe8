// The pickle machine of the PyTorch reader: a restricted unpickler for the data.pkl of a
// torch.save file, which builds plain values and never runs anything.
//
// Design
//  * It knows only the opcodes torch.save emits for a state dict (protocols 2 to 5) and only these
//    globals: collections.OrderedDict, torch._utils._rebuild_tensor_v2, _rebuild_tensor and
//    _rebuild_parameter, and torch.<X>Storage type tags. It builds plain values; nothing is ever
//    called or imported. Any other opcode or global is an error naming it
//    (pytorch.unsupported_opcode, pytorch.unsupported_global), so `os.system` and
//    torch.storage._load_from_bytes are refused when they are named, before any REDUCE.
//  * A persistent id ('storage', torch.<X>Storage, key, location, numel) becomes a storage
//    object, and REDUCE of _rebuild_tensor(_v2) a tensor object: their arguments are checked
//    for type and arity here; what they mean (dtypes, bounds, the bytes they name) is
//    pytorch.hpp's business.
//  * Objects live in one arena addressed by index (cycles built with the memo cannot leak or
//    recurse); nothing is ever traversed recursively. Memory and time stay O(pickle size): every
//    opcode creates at most one object; what the memo lets a pickle reuse (tuples, strings) is
//    referenced, never copied; an opcode's work is bounded before any copy (tensor rank <= 64, at
//    most 7 arguments, storage keys <= 256 bytes, data.pkl <= 1 GiB, checked by the caller).
//  * Stack, mark and memo underflow, wrong types, truncation and invalid UTF-8 are errors
//    (locost::error "pytorch.*", the message giving the byte offset in data.pkl), never crashes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../config/error.hpp"
#include "../core/utf8.hpp"
#include "json.hpp"  // detail::printable

namespace locost::io {

namespace detail::pickle {

// Names of the pickle opcodes (protocols 0 to 5), for messages.
inline const char* opcode_name(unsigned char op) noexcept {
    switch (op) {
    // clang-format off
    case '(': return "MARK"; case '.': return "STOP"; case '0': return "POP"; case '1': return "POP_MARK";
    case '2': return "DUP"; case 'F': return "FLOAT"; case 'I': return "INT"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'L': return "LONG"; case 'M': return "BININT2"; case 'N': return "NONE";
    case 'P': return "PERSID"; case 'Q': return "BINPERSID"; case 'R': return "REDUCE"; case 'S': return "STRING";
    case 'T': return "BINSTRING"; case 'U': return "SHORT_BINSTRING"; case 'V': return "UNICODE";
    case 'X': return "BINUNICODE"; case 'a': return "APPEND"; case 'b': return "BUILD"; case 'c': return "GLOBAL";
    case 'd': return "DICT"; case '}': return "EMPTY_DICT"; case 'e': return "APPENDS"; case 'g': return "GET";
    case 'h': return "BINGET"; case 'i': return "INST"; case 'j': return "LONG_BINGET"; case 'l': return "LIST";
    case ']': return "EMPTY_LIST"; case 'o': return "OBJ"; case 'p': return "PUT"; case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT"; case 's': return "SETITEM"; case 't': return "TUPLE"; case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS"; case 'G': return "BINFLOAT"; case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO"; case 0x81: return "NEWOBJ"; case 0x82: return "EXT1"; case 0x83: return "EXT2";
    case 0x84: return "EXT4"; case 0x85: return "TUPLE1"; case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE"; case 0x8a: return "LONG1"; case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8"; case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET"; case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL"; case 0x94: return "MEMOIZE"; case 0x95: return "FRAME"; case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER"; case 0x98: return "READONLY_BUFFER";
    // clang-format on
    default: return nullptr;
    }
}

// The globals a state dict needs. Storage types are inert tags; which ones locost reads is
// decided when a tensor uses one (pytorch.unsupported_dtype).
enum class global : std::uint8_t { ordered_dict, rebuild_tensor_v2, rebuild_tensor, rebuild_parameter, storage_type };

enum class kind : std::uint8_t { none, boolean, integer, floating, string, tuple, list, dict, global, storage, tensor };

struct object {
    kind k = kind::none;
    global g = global::ordered_dict;  // kind::global
    std::int64_t i = 0;               // boolean/integer value; storage/tensor: index into their tables
    double f = 0;
    std::string s;                     // string; global: its qualified name
    std::vector<std::uint32_t> items;  // tuple/list elements; dict: key, value, key, value, ...
};

// A persistent id. Its strings stay objects of the pickle: a key reused through the memo by
// many persistent ids is never copied.
struct storage {
    std::uint32_t type = 0;  // a global object, "torch.<X>Storage"
    std::uint32_t key = 0;   // a string object, at most max_key bytes
    std::int64_t numel = 0;
};

inline constexpr std::size_t max_rank = 64;
// Longest storage key accepted (torch writes decimal numbers).
inline constexpr std::size_t max_key = 256;
// Largest data.pkl accepted: ~100 bytes per tensor in practice; keeps object indices in 32 bits.
inline constexpr std::uint64_t max_pickle = std::uint64_t{1} << 30;

// A _rebuild_tensor(_v2) call. Its size and stride stay the tuples the pickle built (tuples
// never change once built), so a REDUCE repeated through the memo costs O(1) memory.
struct tensor {
    std::uint32_t storage = 0;  // index into unpickler::storages
    std::int64_t offset = 0;
    std::uint32_t size = 0, stride = 0;  // tuples of ints, rank <= max_rank, checked
};

inline std::string describe(const object& o) {
    switch (o.k) {
    case kind::none: return "None";
    case kind::boolean: return "a bool";
    case kind::integer: return "an int";
    case kind::floating: return "a float";
    case kind::string: return "a str";
    case kind::tuple: return "a tuple of " + std::to_string(o.items.size());
    case kind::list: return "a list";
    case kind::dict: return "a dict";
    case kind::global: return "the global " + detail::printable(o.s);
    case kind::storage: return "a storage";
    case kind::tensor: return "a tensor";
    }
    return "an object";
}

// Runs the restricted pickle machine over data.pkl. Never calls or imports anything: GLOBAL
// resolves to one of the tags above, REDUCE of a tag builds a plain value.
class unpickler {
public:
    unpickler(const std::byte* p, std::size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}

    // The root object.
    std::uint32_t run() {
        for (;;) {
            if (pos_ >= n_) fail("pytorch.pickle_truncated", "the pickle ends without a STOP opcode");
            at_ = pos_;
            op_ = static_cast<unsigned char>(p_[pos_++]);
            switch (op_) {
            case 0x80: {  // PROTO
                const unsigned v = u(1);
                if (v < 2 || v > 5)
                    fail("pytorch.bad_value", "pickle protocol " + std::to_string(v) + " is not supported (expected 2 to 5)");
                break;
            }
            case 0x95:  // FRAME: a length hint; the opcodes follow inline
                if (u(8) > n_ - pos_) fail("pytorch.pickle_truncated", "FRAME announces more bytes than the pickle holds");
                break;
            case '.': return pop();  // STOP
            case '(': marks_.push_back(stack_.size()); break;
            case '}': push(make(kind::dict)); break;
            case ']': push(make(kind::list)); break;
            case ')': push(make(kind::tuple)); break;
            case 't': {
                const std::size_t from = pop_mark();
                const std::uint32_t t = make(kind::tuple);
                objects_[t].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                push(t);
                break;
            }
            case 0x85:
            case 0x86:
            case 0x87: {  // TUPLE1..3
                const std::size_t k = op_ - 0x84u;
                need(k);
                const std::uint32_t t = make(kind::tuple);
                objects_[t].items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
                stack_.resize(stack_.size() - k);
                push(t);
                break;
            }
            case 'X': push(string(u(4))); break;   // BINUNICODE
            case 0x8c: push(string(u(1))); break;  // SHORT_BINUNICODE
            case 0x8d: push(string(u(8))); break;  // BINUNICODE8
            case 'J': push(integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(u(4))))); break;
            case 'K': push(integer(static_cast<std::int64_t>(u(1)))); break;
            case 'M': push(integer(static_cast<std::int64_t>(u(2)))); break;
            case 0x8a: {  // LONG1: little-endian two's complement
                const std::uint64_t len = u(1);
                if (len > 8) fail("pytorch.bad_value", "LONG1 integer of " + std::to_string(len) + " bytes does not fit in 64 bits");
                std::uint64_t v = len ? u(static_cast<std::size_t>(len)) : 0;
                if (len > 0 && len < 8 && (v >> (8 * len - 1)) != 0) v |= ~std::uint64_t{0} << (8 * len);
                push(integer(static_cast<std::int64_t>(v)));
                break;
            }
            case 'G': {  // BINFLOAT: big-endian double
                std::uint64_t bits = 0;
                const std::byte* b = take(8);
                for (int k = 0; k < 8; ++k) bits = bits << 8 | static_cast<std::uint64_t>(b[k]);
                const std::uint32_t o = make(kind::floating);
                std::memcpy(&objects_[o].f, &bits, 8);
                push(o);
                break;
            }
            case 0x88:
            case 0x89: {  // NEWTRUE, NEWFALSE
                const std::uint32_t o = make(kind::boolean);
                objects_[o].i = op_ == 0x88;
                push(o);
                break;
            }
            case 'N': push(make(kind::none)); break;
            case 'c': {  // GLOBAL "module\nname\n"
                const std::string module = line();
                const std::string name = line();
                push(resolve(module, name));
                break;
            }
            case 0x93: {  // STACK_GLOBAL
                need(2);
                const object& name = objects_[stack_.back()];
                const object& module = objects_[stack_[stack_.size() - 2]];
                if (module.k != kind::string || name.k != kind::string)
                    fail("pytorch.pickle_type", "STACK_GLOBAL needs two str, found " + describe(module) + " and " + describe(name));
                const std::string m = module.s, nm = name.s;
                stack_.resize(stack_.size() - 2);
                push(resolve(m, nm));
                break;
            }
            case 'q': put(u(1)); break;
            case 'r': put(u(4)); break;
            case 0x94: put(memo_.size()); break;  // MEMOIZE
            case 'h': get(u(1)); break;
            case 'j': get(u(4)); break;
            case 'R': reduce(); break;
            case 'Q': persistent_id(); break;
            case 's': {  // SETITEM
                need(3);
                const std::uint32_t value = pop(), key = pop();
                dict_top().items.insert(dict_top().items.end(), {key, value});
                break;
            }
            case 'u': {  // SETITEMS
                const std::size_t from = pop_mark();
                if ((stack_.size() - from) % 2 != 0)
                    fail("pytorch.pickle_type",
                         "SETITEMS has an odd number (" + std::to_string(stack_.size() - from) + ") of keys and values");
                std::vector<std::uint32_t> kv(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                auto& items = dict_top().items;
                items.insert(items.end(), kv.begin(), kv.end());
                break;
            }
            case 'a': {  // APPEND
                need(2);
                const std::uint32_t value = pop();
                list_top().items.push_back(value);
                break;
            }
            case 'e': {  // APPENDS
                const std::size_t from = pop_mark();
                std::vector<std::uint32_t> vs(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
                stack_.resize(from);
                auto& items = list_top().items;
                items.insert(items.end(), vs.begin(), vs.end());
                break;
            }
            case 'b': {  // BUILD: sets attributes (OrderedDict's _metadata); ignored for a dict
                need(2);
                pop();
                const object& target = objects_[stack_.back()];
                if (target.k != kind::dict)
                    fail("pytorch.pickle_type", "BUILD on " + describe(target) + " (only a dict's attributes are accepted)");
                break;
            }
            default: {
                const char* name = opcode_name(op_);
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(op_));
                fail("pytorch.unsupported_opcode",
                     name ? "pickle opcode " + std::string(name) + " (" + hex + ") is not supported (a state dict does not need it)"
                          : "unknown pickle opcode " + std::string(hex));
            }
            }
        }
    }

    const object& obj(std::uint32_t i) const { return objects_[i]; }
    const std::vector<storage>& storages() const noexcept { return storages_; }
    const std::vector<tensor>& tensors() const noexcept { return tensors_; }

private:
    [[noreturn]] void fail(const char* id, const std::string& what) const {
        throw error(id, where_ + " byte " + std::to_string(at_) + ": " + what);
    }
    std::string op_name() const { return opcode_name(op_); }

    const std::byte* take(std::size_t k) {
        if (n_ - pos_ < k) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        const std::byte* b = p_ + pos_;
        pos_ += k;
        return b;
    }
    // A little-endian unsigned argument of k <= 8 bytes.
    std::uint64_t u(std::size_t k) {
        const std::byte* b = take(k);
        std::uint64_t v = 0;
        for (std::size_t i = k; i-- > 0;) v = v << 8 | static_cast<std::uint64_t>(b[i]);
        return v;
    }
    std::string line() {
        const auto* b = reinterpret_cast<const char*>(p_ + pos_);
        const void* nl = std::memchr(b, '\n', n_ - pos_);
        if (!nl) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        const auto len = static_cast<std::size_t>(static_cast<const char*>(nl) - b);
        pos_ += len + 1;
        return std::string(b, len);
    }

    std::uint32_t make(kind k) {
        objects_.emplace_back();
        objects_.back().k = k;
        return static_cast<std::uint32_t>(objects_.size() - 1);
    }
    std::uint32_t integer(std::int64_t v) {
        const std::uint32_t o = make(kind::integer);
        objects_[o].i = v;
        return o;
    }
    std::uint32_t string(std::uint64_t len) {
        if (len > n_ - pos_) fail("pytorch.pickle_truncated", "the pickle ends inside the argument of " + op_name());
        std::string s(reinterpret_cast<const char*>(take(static_cast<std::size_t>(len))), static_cast<std::size_t>(len));
        if (!is_valid_utf8(s)) fail("pytorch.bad_value", "string '" + detail::printable(s) + "' is not valid UTF-8");
        const std::uint32_t o = make(kind::string);
        objects_[o].s = std::move(s);
        return o;
    }

    std::uint32_t resolve(const std::string& module, const std::string& name) {
        const std::uint32_t o = make(kind::global);
        object& g = objects_[o];
        g.s = module + "." + name;
        if (module == "collections" && name == "OrderedDict") g.g = global::ordered_dict;
        else if (module == "torch._utils" && name == "_rebuild_tensor_v2") g.g = global::rebuild_tensor_v2;
        else if (module == "torch._utils" && name == "_rebuild_tensor") g.g = global::rebuild_tensor;
        else if (module == "torch._utils" && name == "_rebuild_parameter") g.g = global::rebuild_parameter;
        else if (module == "torch" && name.size() > 7 && name.size() <= 64 && name.ends_with("Storage") &&
                 std::all_of(name.begin(), name.end(),
                             [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }))
            g.g = global::storage_type;
        else
            fail("pytorch.unsupported_global",
                 "global '" + detail::printable(g.s) +
                     "' is not allowed (a state dict needs only collections.OrderedDict, "
                     "torch._utils._rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter and torch storage types)");
        return o;
    }

    void push(std::uint32_t o) { stack_.push_back(o); }
    // Objects above the innermost MARK (the pickle machine cannot see below it).
    std::size_t available() const noexcept { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
    void need(std::size_t k) {
        if (available() < k)
            fail("pytorch.stack_underflow",
                 op_name() + " needs " + std::to_string(k) + " object" + (k > 1 ? "s" : "") + " on the stack, found " +
                     std::to_string(available()));
    }
    std::uint32_t pop() {
        need(1);
        const std::uint32_t o = stack_.back();
        stack_.pop_back();
        return o;
    }
    std::size_t pop_mark() {
        if (marks_.empty()) fail("pytorch.stack_underflow", op_name() + " needs a MARK, but there is none");
        const std::size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    object& dict_top() {
        need(1);
        object& d = objects_[stack_.back()];
        if (d.k != kind::dict) fail("pytorch.pickle_type", op_name() + " on " + describe(d) + ", expected a dict");
        return d;
    }
    object& list_top() {
        need(1);
        object& l = objects_[stack_.back()];
        if (l.k != kind::list) fail("pytorch.pickle_type", op_name() + " on " + describe(l) + ", expected a list");
        return l;
    }
    void put(std::uint64_t index) {
        need(1);
        memo_[index] = stack_.back();
    }
    void get(std::uint64_t index) {
        const auto it = memo_.find(index);
        if (it == memo_.end())
            fail("pytorch.memo_missing", op_name() + " of memo entry " + std::to_string(index) + ", which was never set");
        push(it->second);
    }

    void persistent_id() {
        const object& pid = objects_[pop()];
        auto bad = [&](const std::string& what) {
            fail("pytorch.bad_persistent_id", what + " (expected ('storage', storage type, key, location, numel))");
        };
        if (pid.k != kind::tuple || pid.items.size() != 5) bad("persistent id is " + describe(pid));
        const object& tag = objects_[pid.items[0]];
        const object& type = objects_[pid.items[1]];
        const object& key = objects_[pid.items[2]];
        const object& location = objects_[pid.items[3]];
        const object& numel = objects_[pid.items[4]];
        if (tag.k != kind::string || tag.s != "storage") bad("persistent id starts with " + describe(tag) + ", not 'storage'");
        if (type.k != kind::global || type.g != global::storage_type) bad("persistent id gives " + describe(type) + " as the storage type");
        if (key.k != kind::string) bad("persistent id gives " + describe(key) + " as the key");
        if (key.s.size() > max_key)
            bad("persistent id gives a key of " + std::to_string(key.s.size()) + " bytes, longer than " + std::to_string(max_key));
        if (location.k != kind::string) bad("persistent id gives " + describe(location) + " as the location");
        if (numel.k != kind::integer || numel.i < 0)
            bad("persistent id gives " + (numel.k == kind::integer ? std::to_string(numel.i) : describe(numel)) + " as the element count");
        storages_.push_back({pid.items[1], pid.items[2], numel.i});
        const std::uint32_t o = make(kind::storage);
        objects_[o].i = static_cast<std::int64_t>(storages_.size() - 1);
        push(o);
    }

    void reduce() {
        need(2);
        const std::uint32_t args_i = pop(), fn_i = pop();
        const object& fn = objects_[fn_i];
        const object& args = objects_[args_i];
        if (fn.k != kind::global) fail("pytorch.pickle_type", "REDUCE calls " + describe(fn) + ", expected an allowed global");
        if (args.k != kind::tuple) fail("pytorch.pickle_type", "REDUCE passes " + describe(args) + " to " + fn.s + ", expected a tuple");
        if (fn.g == global::ordered_dict) {
            if (!args.items.empty())
                fail("pytorch.pickle_type",
                     "collections.OrderedDict gets " + std::to_string(args.items.size()) + " arguments, expected none");
            push(make(kind::dict));
            return;
        }
        if (fn.g == global::storage_type)
            fail("pytorch.pickle_type", "REDUCE calls " + fn.s + ", which may appear only in a persistent id");
        // Arity first: a huge tuple REDUCEd again and again through the memo is never copied.
        if (args.items.size() > 7)
            arity(fn.s, args.items.size(), fn.g == global::rebuild_tensor_v2 ? "6 or 7" : fn.g == global::rebuild_tensor ? "4" : "3");
        const std::vector<std::uint32_t> a = args.items;  // objects_ may grow below
        const std::string fname = fn.s;
        switch (fn.g) {
        case global::ordered_dict:
        case global::storage_type: return;  // handled above
        case global::rebuild_parameter: {
            if (a.size() != 3) arity(fname, a.size(), "3");
            if (objects_[a[0]].k != kind::tensor) argument(fname, 1, "data", objects_[a[0]], "a tensor");
            if (objects_[a[1]].k != kind::boolean) argument(fname, 2, "requires_grad", objects_[a[1]], "a bool");
            push(a[0]);  // the parameter is its data
            return;
        }
        case global::rebuild_tensor_v2:
        case global::rebuild_tensor: {
            const bool v2 = fn.g == global::rebuild_tensor_v2;
            if (v2 ? a.size() != 6 && a.size() != 7 : a.size() != 4) arity(fname, a.size(), v2 ? "6 or 7" : "4");
            const object& st = objects_[a[0]];
            if (st.k != kind::storage) argument(fname, 1, "storage", st, "a storage (persistent id)");
            const object& off = objects_[a[1]];
            if (off.k != kind::integer) argument(fname, 2, "storage_offset", off, "an int");
            tensor t;
            t.storage = static_cast<std::uint32_t>(st.i);
            t.offset = off.i;
            t.size = ints(fname, 3, "size", a[2]);
            t.stride = ints(fname, 4, "stride", a[3]);
            const std::size_t rank = objects_[t.size].items.size(), strides = objects_[t.stride].items.size();
            if (strides != rank)
                fail("pytorch.bad_tensor_args",
                     fname + " gets " + std::to_string(rank) + " sizes but " + std::to_string(strides) + " strides");
            if (v2) {
                if (objects_[a[4]].k != kind::boolean) argument(fname, 5, "requires_grad", objects_[a[4]], "a bool");
                if (objects_[a[5]].k != kind::dict) argument(fname, 6, "backward_hooks", objects_[a[5]], "a dict");
            }
            tensors_.push_back(std::move(t));
            const std::uint32_t o = make(kind::tensor);
            objects_[o].i = static_cast<std::int64_t>(tensors_.size() - 1);
            push(o);
            return;
        }
        }
    }
    [[noreturn]] void arity(const std::string& fn, std::size_t got, const char* want) const {
        fail("pytorch.bad_tensor_args", fn + " gets " + std::to_string(got) + " arguments, expected " + want);
    }
    [[noreturn]] void argument(const std::string& fn, int index, const char* what, const object& o, const char* want) const {
        fail("pytorch.bad_tensor_args",
             fn + " argument " + std::to_string(index) + " (" + what + ") is " + describe(o) + ", expected " + want);
    }
    // Checks that object i is a tuple of at most max_rank ints; returns i.
    std::uint32_t ints(const std::string& fn, int index, const char* what, std::uint32_t i) const {
        const object& o = objects_[i];
        if (o.k != kind::tuple) argument(fn, index, what, o, "a tuple of ints");
        if (o.items.size() > max_rank)
            fail("pytorch.bad_tensor_args",
                 fn + " argument " + std::to_string(index) + " (" + what + ") has " + std::to_string(o.items.size()) +
                     " elements, more than the " + std::to_string(max_rank) + " dimensions locost accepts");
        for (const std::uint32_t e : o.items)
            if (objects_[e].k != kind::integer) argument(fn, index, what, o, "a tuple of ints");
        return i;
    }

    const std::byte* p_;
    std::size_t n_;
    std::string where_;
    std::size_t pos_ = 0, at_ = 0;
    unsigned char op_ = 0;
    std::vector<object> objects_;
    std::vector<std::uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, std::uint32_t> memo_;
    std::vector<storage> storages_;
    std::vector<tensor> tensors_;
};

}  // namespace detail::pickle

}  // namespace locost::io
