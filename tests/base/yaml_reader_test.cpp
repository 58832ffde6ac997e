#include "base/yaml_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/text.hpp"

namespace {

using gpuenv::Error;
using gpuenv::ErrorKind;
using gpuenv::Result;
using gpuenv::YamlDoc;
using gpuenv::YamlReader;

/// A reader of doc.yaml with the spec's conventions (ids "spec.*", exit 2, a default hint).
YamlReader spec_like() { return YamlReader({"doc.yaml", ErrorKind::spec, "spec", "see docs/spec.md"}); }

/// A reader with the lock's conventions: wrong types are "lock.bad_value".
YamlReader lock_like() {
  return YamlReader({"doc.lock", ErrorKind::spec, "lock", "re-create the lock", "bad_value", "missing"});
}

YAML::Node load(const std::string& text) { return YAML::Load(text); }

template <class T>
Error error_of(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? Error{} : r.error();
}

TEST(YamlReader, ErrorCarriesTheDocumentsIdKindPositionAndHint) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("a: 1\nb:\n  c: 2\n");
  const Error e = r.error(root["b"]["c"], "bad_thing", "c is bad", "fix c");
  EXPECT_EQ(e.id, "spec.bad_thing");
  EXPECT_EQ(e.kind, ErrorKind::spec);
  EXPECT_EQ(e.where, "doc.yaml:3:6");
  EXPECT_EQ(e.message, "c is bad");
  EXPECT_EQ(e.hint, "fix c");
  EXPECT_EQ(r.error(root, "other", "m").hint, "see docs/spec.md");  // the document's hint when none is given

  const YamlReader internal({"cat.yaml", ErrorKind::internal, "catalog", "the catalog is broken"});
  EXPECT_EQ(internal.error(root["a"], "invalid", "m").kind, ErrorKind::internal);
  EXPECT_EQ(internal.error(root["a"], "invalid", "m").id, "catalog.invalid");
}

TEST(YamlReader, WhereIsFileLineColumnAndThePathForAbsentNodes) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("top:\n  - x\n  - {k: v}\n");
  EXPECT_EQ(r.where(root), "doc.yaml:1:1");
  EXPECT_EQ(r.where(root["top"][1]["k"]), "doc.yaml:3:9");
  EXPECT_EQ(r.where(root["nothing"]), "doc.yaml");  // a key the mapping lacks has no position
  EXPECT_EQ(r.where(YAML::Node("built")), "doc.yaml");
}

TEST(YamlReader, MapReturnsEntriesInOrder) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("b: 1\na: [2]\n");
  auto m = r.map(root, "spec", {"a", "b"});
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].first.Scalar(), "b");
  EXPECT_EQ((*m)[1].first.Scalar(), "a");
  EXPECT_TRUE((*m)[1].second.IsSequence());
  EXPECT_TRUE(r.map(root, "spec", {}).ok());  // no allowed list: any key
}

TEST(YamlReader, MapRefusesOtherTypesAndNonScalarKeys) {
  const YamlReader r = spec_like();
  const Error list = error_of(r.map(load("x: [1, 2]\n")["x"], "x", {}));
  EXPECT_EQ(list.id, "spec.wrong_type");
  EXPECT_EQ(list.message, "'x' must be a mapping, found a list");
  EXPECT_EQ(list.where, "doc.yaml:1:4");
  EXPECT_EQ(list.hint, "see docs/spec.md");

  const Error key = error_of(r.map(load("{[a]: 1}\n"), "spec", {}));
  EXPECT_EQ(key.id, "spec.wrong_type");
  EXPECT_EQ(key.message, "keys in 'spec' must be plain words, found a list");
  EXPECT_EQ(key.where, "doc.yaml:1:2");

  EXPECT_EQ(error_of(lock_like().map(load("[1]\n"), "lock", {})).id, "lock.bad_value");
}

TEST(YamlReader, MapRefusesDuplicateKeysAtTheSecond) {
  const Error e = error_of(spec_like().map(load("name: a\ncuda: '12'\nname: b\n"), "spec", {}));
  EXPECT_EQ(e.id, "spec.duplicate_key");
  EXPECT_EQ(e.where, "doc.yaml:3:1");
  EXPECT_EQ(e.message, "key 'name' appears twice in 'spec'");
  EXPECT_EQ(e.hint, "keep one of them; YAML would silently use only one");
}

TEST(YamlReader, MapRefusesUnknownKeysWithDidYouMean) {
  const YamlReader thresholds({"t.yaml", ErrorKind::spec, "thresholds", "see docs/thresholds.md"});
  const std::vector<std::string> allowed = {"schema", "fail_fraction", "gpus"};
  const Error near = error_of(thresholds.map(load("gpus: []\nfail_fractoin: 0.5\n"), "thresholds", allowed));
  EXPECT_EQ(near.id, "thresholds.unknown_key");
  EXPECT_EQ(near.where, "t.yaml:2:1");
  EXPECT_EQ(near.message, "unknown key 'fail_fractoin' in 'thresholds'");
  EXPECT_EQ(near.hint, "did you mean 'fail_fraction'? allowed keys: schema, fail_fraction, gpus");

  const Error far = error_of(thresholds.map(load("zzzzzzzz: 1\n"), "thresholds", allowed));
  EXPECT_EQ(far.id, "thresholds.unknown_key");
  EXPECT_EQ(far.hint, "allowed keys: schema, fail_fraction, gpus");
}

TEST(YamlReader, DidYouMeanIgnoresCaseAndFarWords) {
  EXPECT_EQ(gpuenv::did_you_mean("GPU", {"frameworks", "gpu"}), "gpu");
  EXPECT_EQ(gpuenv::did_you_mean("frameworx", {"frameworks", "gpu"}), "frameworks");
  EXPECT_FALSE(gpuenv::did_you_mean("zzzzzz", {"frameworks", "gpu"}).has_value());
}

TEST(YamlReader, ScalarIsNonBlankText) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("a: hello\nb: ''\nc: '  '\nd: [x]\ne:\n");
  EXPECT_EQ(*r.scalar(root["a"], "a"), "hello");
  for (const char* key : {"b", "c", "d", "e"}) {
    const Error e = error_of(r.scalar(root[key], key));
    EXPECT_EQ(e.id, "spec.wrong_type") << key;
    EXPECT_EQ(e.message.rfind("'" + std::string(key) + "' must be a non-empty text value, found ", 0), 0u) << e.message;
  }
  EXPECT_EQ(error_of(r.scalar(root["d"], "d")).message, "'d' must be a non-empty text value, found a list");
  EXPECT_EQ(error_of(r.scalar(root["e"], "e")).message, "'e' must be a non-empty text value, found nothing (null)");
  EXPECT_EQ(error_of(r.scalar(root["d"], "d")).where, "doc.yaml:4:4");
}

TEST(YamlReader, TextAcceptsEmptyButNotOtherTypes) {
  const YamlReader r = lock_like();
  const YAML::Node root = load("a: ''\nb: {x: 1}\n");
  EXPECT_EQ(*r.text(root["a"], "a"), "");
  const Error e = error_of(r.text(root["b"], "b"));
  EXPECT_EQ(e.id, "lock.bad_value");
  EXPECT_EQ(e.message, "'b' must be a text value, found a mapping");
  EXPECT_EQ(e.where, "doc.lock:2:4");
  EXPECT_EQ(e.hint, "re-create the lock");
}

TEST(YamlReader, StringListWithAndWithoutASingleItem) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("one: curl\nmany: [a, b]\nmap: {a: b}\nbad: [a, [b]]\n");
  EXPECT_EQ(*r.string_list(root["one"], "one", true), std::vector<std::string>{"curl"});
  EXPECT_EQ(*r.string_list(root["many"], "many", false), (std::vector<std::string>{"a", "b"}));

  const Error single = error_of(r.string_list(root["one"], "one", false));
  EXPECT_EQ(single.id, "spec.wrong_type");
  EXPECT_EQ(single.message, "'one' must be a list, found a scalar");
  EXPECT_EQ(single.hint, "see docs/spec.md");

  const Error map = error_of(r.string_list(root["map"], "map", true));
  EXPECT_EQ(map.message, "'map' must be a list, found a mapping");
  EXPECT_EQ(map.where, "doc.yaml:3:6");
  EXPECT_NE(map.hint.find("a single item"), std::string::npos) << map.hint;

  const Error item = error_of(r.string_list(root["bad"], "bad", true));
  EXPECT_EQ(item.id, "spec.wrong_type");
  EXPECT_EQ(item.message, "'bad item' must be a non-empty text value, found a list");
  EXPECT_EQ(item.where, "doc.yaml:4:10");
}

TEST(YamlReader, ListIsASequence) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("l: [1]\nm: 3\n");
  EXPECT_TRUE(r.list(root["l"], "l")->IsSequence());
  const Error e = error_of(r.list(root["m"], "m"));
  EXPECT_EQ(e.id, "spec.wrong_type");
  EXPECT_EQ(e.message, "'m' must be a list, found a scalar");
  EXPECT_EQ(e.where, "doc.yaml:2:4");
}

TEST(YamlReader, NumberIsAPlainFiniteDecimal) {
  const YamlReader r({"t.yaml", ErrorKind::spec, "thresholds", "see docs/thresholds.md"});
  const YAML::Node root = load("a: 4800\nb: 4.8\nc: 1e-3\nd: -2\n");
  EXPECT_DOUBLE_EQ(*r.number(root["a"], "a"), 4800);
  EXPECT_DOUBLE_EQ(*r.number(root["b"], "b"), 4.8);
  EXPECT_DOUBLE_EQ(*r.number(root["c"], "c"), 0.001);
  EXPECT_DOUBLE_EQ(*r.number(root["d"], "d"), -2);
  for (const char* bad :
       {"\"3110\"", "'3110'", "3110 GB/s", ".inf", "inf", "nan", "0x10", "+5", "1,5", "[1]", "{a: 1}"}) {
    const YAML::Node n = load(std::string("value: ") + bad + "\n")["value"];
    const Error e = error_of(r.number(n, "value"));
    EXPECT_EQ(e.id, "thresholds.wrong_type") << bad;
    EXPECT_EQ(e.where, "t.yaml:1:8") << bad;
  }
  EXPECT_EQ(error_of(r.number(load("value:\n")["value"], "value")).id, "thresholds.wrong_type");  // null
  const Error quoted = error_of(r.number(load("value: \"3110\"\n")["value"], "value"));
  EXPECT_EQ(quoted.message, "'value' must be a plain number, found the quoted text '3110'");
  EXPECT_NE(quoted.hint.find("without quotes"), std::string::npos) << quoted.hint;
  const Error unit = error_of(r.number(load("value: 3110 GB/s\n")["value"], "value"));
  EXPECT_EQ(unit.message, "'value' must be a plain number, found '3110 GB/s'");
  const Error list = error_of(r.number(load("value: [1]\n")["value"], "value"));
  EXPECT_EQ(list.message, "'value' must be a number, found a list");
  EXPECT_EQ(list.hint, "see docs/thresholds.md");
}

TEST(YamlReader, IntegerIsAPlainWholeNumberThatFitsAnInt) {
  const YamlReader r({"cat.yaml", ErrorKind::internal, "catalog", "broken catalog", "invalid", "invalid"});
  const YAML::Node root = load("a: 90\nb: -1\n");
  EXPECT_EQ(*r.integer(root["a"], "a"), 90);
  EXPECT_EQ(*r.integer(root["b"], "b"), -1);
  for (const char* bad : {"\"90\"", "9.0", "0x5a", "90a", "99999999999", "[1]"}) {
    const Error e = error_of(r.integer(load(std::string("sm: ") + bad + "\n")["sm"], "sm"));
    EXPECT_EQ(e.id, "catalog.invalid") << bad;
    EXPECT_EQ(e.kind, ErrorKind::internal) << bad;
    EXPECT_EQ(e.where, "cat.yaml:1:5") << bad;
  }
  EXPECT_EQ(error_of(r.integer(load("sm: 9.0\n")["sm"], "sm")).message, "'sm' must be a whole number, found '9.0'");
}

TEST(YamlReader, BooleanIsTrueOrFalse) {
  const YamlReader r = spec_like();
  const YAML::Node root = load("a: true\nb: false\nc: yes\nd: [true]\n");
  EXPECT_TRUE(*r.boolean(root["a"], "a"));
  EXPECT_FALSE(*r.boolean(root["b"], "b"));
  const Error yes = error_of(r.boolean(root["c"], "c"));
  EXPECT_EQ(yes.id, "spec.wrong_type");
  EXPECT_EQ(yes.message, "'c' must be true or false, found 'yes'");
  EXPECT_EQ(yes.where, "doc.yaml:3:4");
  EXPECT_EQ(error_of(r.boolean(root["d"], "d")).message, "'d' must be true or false, found a list");
}

TEST(YamlReader, FieldSaysWhatIsMissingAtItsParent) {
  const YamlReader r = lock_like();
  const YAML::Node root = load("spec:\n  name: x\n  sha256: ~\nlist: [1]\n");
  EXPECT_EQ(r.field(root["spec"], "name")->Scalar(), "x");

  const Error missing = error_of(r.field(root["spec"], "version"));
  EXPECT_EQ(missing.id, "lock.missing");
  EXPECT_EQ(missing.message, "'version' is missing");
  EXPECT_EQ(missing.where, "doc.lock:2:3");  // the mapping that lacks it
  EXPECT_EQ(missing.hint, "re-create the lock");

  EXPECT_EQ(error_of(r.field(root["spec"], "sha256")).id, "lock.missing");  // null is missing...
  auto nullable = r.field(root["spec"], "sha256", /*nullable=*/true);      // ...unless nullable
  ASSERT_TRUE(nullable.ok());
  EXPECT_TRUE(nullable->IsNull());

  const Error not_map = error_of(r.field(root["list"], "name"));
  EXPECT_EQ(not_map.id, "lock.bad_value");
  EXPECT_EQ(not_map.message, "expected a mapping holding 'name', found a list");
  EXPECT_EQ(not_map.where, "doc.lock:4:7");

  EXPECT_EQ(error_of(r.field(YAML::Node(YAML::NodeType::Null), "name")).id, "lock.missing");  // null: an empty mapping
}

TEST(YamlReader, OptionalFieldIsUndefinedWhenAbsent) {
  const YamlReader r({"cat.yaml", ErrorKind::internal, "catalog", "broken catalog", "invalid", "invalid"});
  const YAML::Node root = load("a: 1\nl: [1]\n");
  EXPECT_EQ(r.optional_field(root, "a")->Scalar(), "1");
  auto absent = r.optional_field(root, "b");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->IsDefined());
  EXPECT_EQ(error_of(r.optional_field(root["l"], "a")).id, "catalog.invalid");
  EXPECT_EQ(error_of(r.field(root, "b")).id, "catalog.invalid");
  EXPECT_EQ(error_of(r.field(root, "b")).where, "cat.yaml:1:1");
}

}  // namespace
