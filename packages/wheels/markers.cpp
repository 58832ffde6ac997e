#include "packages/wheels/markers.hpp"

#include <array>
#include <optional>
#include <utility>

namespace gpuenv::packages {
namespace {

constexpr int k_max_marker_depth = 32;  // nested parentheses in one marker (real markers use two or three)


bool is_marker_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Python's \w on str also matches non-ASCII letters; every byte of a multi-byte UTF-8 sequence stands for one.
bool is_marker_word(char c) { return is_marker_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80; }
char marker_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Marker variables in the order of packaging's VARIABLE token alternatives.
// PEP 751 adds the sets `extras` and `dependency_groups`; `extra` must not match their prefix, which the word
// boundary after each name already prevents.
constexpr std::array<std::string_view, 20> k_variables = {
    "python_version",   "python_full_version", "os_name",          "os.name",
    "sys_platform",     "sys.platform",        "platform_release", "platform_system",
    "platform_version", "platform.version",    "platform_machine", "platform.machine",
    "platform_python_implementation", "platform.python_implementation", "python_implementation",
    "implementation_name", "implementation_version", "extras", "dependency_groups", "extra"};

// The tokenizer and recursive-descent parser of packaging._parser, one method per grammar rule.
class Pep508Parser {
 public:
  explicit Pep508Parser(std::string_view source) : m_s(source) {}

  Result<Requirement> requirement() {
    Requirement req;
    consume_ws();
    const std::size_t name_len = identifier_len();
    if (name_len == 0) return fail("package name at the start of dependency specifier");
    req.name = std::string(m_s.substr(m_pos, name_len));
    m_pos += name_len;
    consume_ws();
    if (auto st = extras(req.extras); !st.ok()) return std::move(st).error();
    consume_ws();
    if (auto st = details(req); !st.ok()) return std::move(st).error();
    if (!at_end()) return fail("end of dependency specifier");
    return req;
  }

  Result<MarkerNode> standalone_marker() {
    auto node = marker();
    if (!node.ok()) return node;
    consume_ws();
    if (!at_end()) return fail("end of marker expression or 'and'/'or'");
    return node;
  }

 private:
  Error syntax(std::string what) const {
    return make_error(ErrorKind::spec, "pep508.syntax",
                      what + " at column " + std::to_string(m_pos + 1) + " of '" + std::string(m_s) + "'", {},
                      "write requirements as PEP 508 does, e.g. name[extra]>=1.0,<2; python_version >= \"3.8\"");
  }
  Error fail(const std::string& expected) const { return syntax("Expected " + expected); }

  bool boundary(std::size_t pos) const {
    const bool before = pos > 0 && pos <= m_s.size() && is_marker_word(m_s[pos - 1]);
    const bool after = pos < m_s.size() && is_marker_word(m_s[pos]);
    return before != after;
  }
  // `$` in Python also matches just before a final newline.
  bool at_end() const { return m_pos == m_s.size() || (m_pos + 1 == m_s.size() && m_s[m_pos] == '\n'); }
  bool peek(char c) const { return m_pos < m_s.size() && m_s[m_pos] == c; }
  std::size_t ws_len() const {
    std::size_t e = m_pos;
    while (e < m_s.size() && (m_s[e] == ' ' || m_s[e] == '\t')) ++e;
    return e - m_pos;
  }
  void consume_ws() { m_pos += ws_len(); }
  bool keyword(std::string_view word) const {
    return m_s.substr(m_pos, word.size()) == word && boundary(m_pos) && boundary(m_pos + word.size());
  }
  // \b[a-zA-Z0-9][a-zA-Z0-9._-]*\b
  std::size_t identifier_len() const {
    if (m_pos >= m_s.size() || !is_marker_alnum(m_s[m_pos]) || !boundary(m_pos)) return 0;
    std::size_t e = m_pos + 1;
    while (e < m_s.size() && (is_marker_alnum(m_s[e]) || m_s[e] == '.' || m_s[e] == '_' || m_s[e] == '-')) ++e;
    while (e > m_pos + 1 && !boundary(e)) --e;
    return boundary(e) ? e - m_pos : 0;
  }

  Status extras(std::vector<std::string>& out) {
    if (!peek('[')) return ok_status();
    const std::size_t open = m_pos;
    ++m_pos;
    consume_ws();
    if (std::size_t n = identifier_len(); n > 0) {
      out.emplace_back(m_s.substr(m_pos, n));
      m_pos += n;
      for (;;) {
        consume_ws();
        if (identifier_len() > 0) return syntax("Expected comma between extra names");
        if (!peek(',')) break;
        ++m_pos;
        consume_ws();
        const std::size_t len = identifier_len();
        if (len == 0) return fail("extra name after comma");
        out.emplace_back(m_s.substr(m_pos, len));
        m_pos += len;
      }
    }
    consume_ws();
    if (!peek(']')) return fail("closing RIGHT_BRACKET (opened at column " + std::to_string(open + 1) + ")");
    ++m_pos;
    return ok_status();
  }

  Status details(Requirement& req) {
    if (peek('@')) {
      ++m_pos;
      consume_ws();
      std::size_t e = m_pos;
      while (e < m_s.size() && m_s[e] != ' ' && m_s[e] != '\t') ++e;
      if (e == m_pos) return fail("URL after @");
      req.url = std::string(m_s.substr(m_pos, e - m_pos));
      m_pos = e;
      if (at_end()) return ok_status();
      if (ws_len() == 0) return fail("whitespace after URL");
      consume_ws();
      if (at_end()) return ok_status();
      return requirement_marker(req, "URL and whitespace");
    }
    const bool paren = peek('(');
    const std::size_t open = m_pos;
    if (paren) ++m_pos;
    consume_ws();
    // version_many = (SPECIFIER (WS? COMMA WS? SPECIFIER)*)?
    while (std::size_t n = match_specifier_prefix(m_s, m_pos)) {
      req.specifier_text += m_s.substr(m_pos, n);
      m_pos += n;
      consume_ws();
      if (!peek(',')) break;
      req.specifier_text += ',';
      ++m_pos;
      consume_ws();
    }
    consume_ws();
    if (paren) {
      if (!peek(')')) return fail("closing RIGHT_PARENTHESIS (opened at column " + std::to_string(open + 1) + ")");
      ++m_pos;
    }
    consume_ws();
    if (at_end()) return ok_status();
    return requirement_marker(req, req.specifier_text.empty() ? "name and no valid version specifier"
                                                              : "version specifier");
  }

  Status requirement_marker(Requirement& req, const std::string& after) {
    if (!peek(';')) return fail("end or semicolon (after " + after + ")");
    ++m_pos;
    auto node = marker();
    if (!node.ok()) return std::move(node).error();
    consume_ws();
    req.marker = Marker(std::move(node).value());
    return ok_status();
  }

  // marker = marker_atom (BOOLOP marker_atom)*
  Result<MarkerNode> marker() {
    MarkerNode list;
    list.is_list = true;
    for (;;) {
      auto atom = marker_atom();
      if (!atom.ok()) return atom;
      list.children.push_back(std::move(atom).value());
      if (keyword("or")) {
        list.joins.emplace_back("or");
        m_pos += 2;
      } else if (keyword("and")) {
        list.joins.emplace_back("and");
        m_pos += 3;
      } else {
        return list;
      }
    }
  }

  Result<MarkerNode> marker_atom() {
    consume_ws();
    Result<MarkerNode> node = MarkerNode{};
    if (peek('(')) {
      const std::size_t open = m_pos;
      // A bound on nesting: the parser, the tree's evaluation, printing and destruction all recurse per level.
      if (m_depth == k_max_marker_depth) return fail("at most " + std::to_string(k_max_marker_depth) + " nested parentheses");
      ++m_pos;
      consume_ws();
      ++m_depth;
      node = marker();
      --m_depth;
      if (!node.ok()) return node;
      consume_ws();
      if (!peek(')')) return fail("closing RIGHT_PARENTHESIS (opened at column " + std::to_string(open + 1) + ")");
      ++m_pos;
    } else {
      node = marker_item();
      if (!node.ok()) return node;
    }
    consume_ws();
    return node;
  }

  Result<MarkerNode> marker_item() {
    MarkerNode item;
    consume_ws();
    const std::size_t start = m_pos;
    auto lhs = marker_var();
    if (!lhs.ok()) return std::move(lhs).error();
    item.lhs = std::move(lhs).value();
    consume_ws();
    auto op = marker_op();
    if (!op.ok()) return std::move(op).error();
    item.op = std::move(op).value();
    consume_ws();
    auto rhs = marker_var();
    if (!rhs.ok()) return std::move(rhs).error();
    item.rhs = std::move(rhs).value();
    if (!item.lhs.is_variable && !item.rhs.is_variable) {
      m_pos = start;
      return syntax("Expected a marker variable on one side of the comparison");
    }
    consume_ws();
    return item;
  }

  Result<MarkerOperand> marker_var() {
    for (std::string_view name : k_variables) {
      if (!keyword(name)) continue;
      m_pos += name.size();
      std::string normalized(name);
      for (char& c : normalized) c = c == '.' ? '_' : c;
      if (normalized == "python_implementation") normalized = "platform_python_implementation";
      return MarkerOperand{true, std::move(normalized)};
    }
    if (peek('\'') || peek('"')) {
      const char quote = m_s[m_pos];
      const std::size_t close = m_s.find(quote, m_pos + 1);
      if (close != std::string_view::npos) {
        std::string value(m_s.substr(m_pos + 1, close - m_pos - 1));
        if (value.find('\\') != std::string::npos) {
          return syntax("Backslash in a marker string (PEP 508 strings have no escapes)");
        }
        m_pos = close + 1;
        return MarkerOperand{false, std::move(value)};
      }
    }
    return syntax("Expected a marker variable or quoted string");
  }

  Result<std::string> marker_op() {
    if (keyword("in")) {
      m_pos += 2;
      return std::string("in");
    }
    if (keyword("not")) {
      m_pos += 3;
      if (ws_len() == 0) return fail("whitespace after 'not'");
      consume_ws();
      if (!keyword("in")) return fail("'in' after 'not'");
      m_pos += 2;
      return std::string("not in");
    }
    for (std::string_view op : {"===", "==", "~=", "!=", "<=", ">=", "<", ">"}) {
      if (m_s.substr(m_pos, op.size()) == op) {
        m_pos += op.size();
        return std::string(op);
      }
    }
    return fail("marker operator, one of <=, <, !=, ==, >=, >, ~=, ===, in, not in");
  }

  std::string_view m_s;
  std::size_t m_pos = 0;
  int m_depth = 0;  ///< parentheses open around m_pos
};

Result<bool> compare(const std::string& lhs, const std::string& op, const std::string& rhs) {
  if (auto spec = Pep440Specifier::parse(op + rhs); spec.ok()) {
    if (auto version = Pep440Version::parse(lhs); version.ok()) return spec->contains(*version, true);
    // packaging >= 22 raises here; earlier releases and the PEP compare such values as strings, and so do we.
  }
  if (op == "in") return rhs.find(lhs) != std::string::npos;
  if (op == "not in") return rhs.find(lhs) == std::string::npos;
  if (op == "==") return lhs == rhs;
  if (op == "!=") return lhs != rhs;
  if (op == "<") return lhs < rhs;
  if (op == "<=") return lhs <= rhs;
  if (op == ">") return lhs > rhs;
  if (op == ">=") return lhs >= rhs;
  return make_error(ErrorKind::spec, "pep508.undefined_comparison",
                    "marker comparison '" + lhs + "' " + op + " '" + rhs + "' is undefined: " + op +
                        " needs PEP 440 versions on both sides",
                    {}, "use ==, !=, <, <=, >, >= or in for values that are not versions");
}

std::string format_operand(const MarkerOperand& o);

bool contains_name(const std::vector<std::string>& names, const std::string& name) {
  const std::string wanted = canonicalize_name(name);
  for (const std::string& n : names) {
    if (canonicalize_name(n) == wanted) return true;
  }
  return false;
}

Error undefined_set_comparison(const MarkerNode& node) {
  return make_error(ErrorKind::spec, "pep508.undefined_comparison",
                    "marker comparison " + format_operand(node.lhs) + " " + node.op + " " + format_operand(node.rhs) +
                        " is undefined: " + (node.lhs.is_variable ? node.lhs.text : node.rhs.text) + " is a set",
                    {}, "write \"name\" in extras, or \"name\" not in dependency_groups (PEP 751)");
}

// A comparison with a set: PEP 751's `extras` and `dependency_groups`, or `extra` holding several values at once.
std::optional<Result<bool>> evaluate_set_comparison(const MarkerNode& node, const Environment& env) {
  const std::string& key = node.lhs.is_variable ? node.lhs.text : node.rhs.text;
  const bool is_set = key == "extras" || key == "dependency_groups";
  if (!is_set && !(key == "extra" && !env.active_extras.empty())) return std::nullopt;
  if (node.lhs.is_variable && node.rhs.is_variable) return Result<bool>(undefined_set_comparison(node));
  const std::string& literal = node.lhs.is_variable ? node.rhs.text : node.lhs.text;
  if (is_set) {
    if (node.lhs.is_variable || (node.op != "in" && node.op != "not in")) return Result<bool>(undefined_set_comparison(node));
    const bool found = contains_name(key == "extras" ? env.extras : env.dependency_groups, literal);
    return Result<bool>(node.op == "in" ? found : !found);
  }
  if (node.op != "==" && node.op != "!=") return Result<bool>(undefined_set_comparison(node));
  const bool found = contains_name(env.active_extras, literal);
  return Result<bool>(node.op == "==" ? found : !found);
}

Result<bool> evaluate_node(const MarkerNode& node, const Environment& env) {
  if (!node.is_list) {
    if (auto set = evaluate_set_comparison(node, env)) return std::move(*set);
    // One side is a variable (parse guarantees it); the key decides whether extra normalization applies.
    const std::string& key = node.lhs.is_variable ? node.lhs.text : node.rhs.text;
    auto value = [&](const MarkerOperand& o) {
      return o.is_variable ? marker_variable(env, o.text).value_or(std::string()) : o.text;
    };
    std::string lhs = value(node.lhs);
    std::string rhs = value(node.rhs);
    if (key == "extra") {
      lhs = canonicalize_name(lhs);
      rhs = canonicalize_name(rhs);
    }
    return compare(lhs, node.op, rhs);
  }
  // any(all(group) for group split at "or"); every item is evaluated, as packaging does, so errors surface.
  bool any = false;
  bool group = true;
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    if (i > 0 && node.joins[i - 1] == "or") {
      any = any || group;
      group = true;
    }
    auto r = evaluate_node(node.children[i], env);
    if (!r.ok()) return r;
    group = group && *r;
  }
  return any || group;
}

std::string format_operand(const MarkerOperand& o) { return o.is_variable ? o.text : "\"" + o.text + "\""; }

// packaging's _format_marker: a list holding one element prints as that element, nested lists in parentheses.
std::string format_node(const MarkerNode& node, bool first) {
  if (!node.is_list) return format_operand(node.lhs) + " " + node.op + " " + format_operand(node.rhs);
  if (node.children.size() == 1) return format_node(node.children[0], true);
  std::string inner;
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    if (i > 0) inner += " " + node.joins[i - 1] + " ";
    inner += format_node(node.children[i], false);
  }
  return first ? inner : "(" + inner + ")";
}

// urllib.parse.urlsplit's scheme and netloc, enough for packaging's URL check.
Status check_url(const std::string& url, std::string_view requirement) {
  auto bad = [&](const std::string& why) -> Status {
    return make_error(ErrorKind::spec, "pep508.url", "invalid URL '" + url + "' in '" + std::string(requirement) +
                                                         "': " + why,
                      {}, "write a full URL such as https://example.com/pkg-1.0.tar.gz or file:///path/pkg.whl");
  };
  const std::size_t colon = url.find(':');
  std::string scheme;
  const bool letter_first = !url.empty() && ((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z'));
  if (colon != std::string::npos && colon > 0 && letter_first) {
    bool valid = true;
    for (std::size_t i = 0; i < colon; ++i) {
      const char c = url[i];
      valid = valid && (is_marker_alnum(c) || c == '+' || c == '-' || c == '.');
    }
    if (valid) {
      for (std::size_t i = 0; i < colon; ++i) scheme += marker_lower(url[i]);
    }
  }
  if (scheme == "file") {
    // packaging requires file URLs to survive urlunparse unchanged, which only the "file://" spelling does.
    if (!url.starts_with("file://")) return bad("file URLs must start with file://");
    return ok_status();
  }
  if (scheme.empty()) return bad("it has no scheme");
  const std::string rest = url.substr(colon + 1);
  if (!rest.starts_with("//")) return bad("it has no host");
  const std::size_t end = rest.find_first_of("/?#", 2);
  if ((end == std::string::npos ? rest.size() : end) == 2) return bad("it has no host");
  return ok_status();
}

}  // namespace

Environment cpython_linux_environment(std::string_view machine, std::string_view python) {
  Environment env;
  env.python_version = std::string(python);
  env.python_full_version = env.python_version + ".0";
  env.os_name = "posix";
  env.sys_platform = "linux";
  env.platform_machine = std::string(machine);
  env.platform_system = "Linux";
  env.implementation_name = "cpython";
  env.implementation_version = env.python_full_version;
  env.platform_python_implementation = "CPython";
  return env;
}

std::optional<std::string> marker_variable(const Environment& env, std::string_view name) {
  if (name == "python_version") return env.python_version;
  if (name == "python_full_version") return env.python_full_version;
  if (name == "os_name") return env.os_name;
  if (name == "sys_platform") return env.sys_platform;
  if (name == "platform_machine") return env.platform_machine;
  if (name == "platform_system") return env.platform_system;
  if (name == "platform_release") return env.platform_release;
  if (name == "platform_version") return env.platform_version;
  if (name == "implementation_name") return env.implementation_name;
  if (name == "implementation_version") return env.implementation_version;
  if (name == "platform_python_implementation") return env.platform_python_implementation;
  if (name == "extra") return env.extra;
  return std::nullopt;
}

std::string canonicalize_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '-';
      in_run = true;
      continue;
    }
    in_run = false;
    out += marker_lower(c);
  }
  return out;
}

Marker::Marker(MarkerNode root) : m_root(std::move(root)) {
  // packaging normalizes the extra name of the first comparison only, which shows in str(); evaluation
  // normalizes every extra comparison anyway.
  if (m_root.is_list && !m_root.children.empty() && !m_root.children[0].is_list) {
    MarkerNode& first = m_root.children[0];
    if (first.lhs.is_variable && first.lhs.text == "extra" && !first.rhs.is_variable) {
      first.rhs.text = canonicalize_name(first.rhs.text);
    } else if (first.rhs.is_variable && first.rhs.text == "extra" && !first.lhs.is_variable) {
      first.lhs.text = canonicalize_name(first.lhs.text);
    }
  }
}

Result<Marker> Marker::parse(std::string_view text) {
  auto root = Pep508Parser(text).standalone_marker();
  if (!root.ok()) return std::move(root).error();
  return Marker(std::move(root).value());
}

Result<bool> Marker::evaluate(const Environment& env) const { return evaluate_node(m_root, env); }

std::string Marker::str() const { return format_node(m_root, true); }

Result<Requirement> parse_requirement(std::string_view text) {
  auto req = Pep508Parser(text).requirement();
  if (!req.ok()) return req;
  if (!req->url.empty()) {
    if (auto st = check_url(req->url, text); !st.ok()) return std::move(st).error();
  }
  auto spec = Pep440SpecifierSet::parse(req->specifier_text);
  if (!spec.ok()) {
    Error e = std::move(spec).error();
    e.while_("parsing requirement '" + std::string(text) + "'");
    return e;
  }
  req->specifier = std::move(spec).value();
  return req;
}

}  // namespace gpuenv::packages
