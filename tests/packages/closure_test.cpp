#include "packages/apt/closure.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using gpuenv::ErrorKind;
using gpuenv::packages::BinaryPackage;
using gpuenv::packages::ClosureRequest;
using gpuenv::packages::ClosureResult;
using gpuenv::packages::dependency_closure;
using gpuenv::packages::installed_packages_text;
using gpuenv::packages::PackageIndex;
using gpuenv::packages::RepositoryRef;

namespace {

PackageIndex index_of(const std::string& text) {
  PackageIndex index;
  auto st = index.add(text, RepositoryRef{"http://127.0.0.1/debian/", "stable", "main", "Packages"}, {"amd64", "all"});
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().to_string());
  return index;
}

// A stanza; `extra` holds more fields, one "Name: value" per line.
std::string pkg(const std::string& name, const std::string& version, const std::string& extra = "",
                const std::string& arch = "amd64") {
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: " + arch + "\nPriority: optional\n" + extra +
         (extra.empty() || extra.back() == '\n' ? "" : "\n") + "\n";
}

ClosureRequest req(std::vector<std::string> packages, bool required_set = false) {
  ClosureRequest r;
  r.packages = std::move(packages);
  r.required_set = required_set;
  return r;
}

// "name version" of each package of the result, in result order.
std::vector<std::string> names(const ClosureResult& r) {
  std::vector<std::string> out;
  for (const BinaryPackage* p : r.packages) out.push_back(std::string(p->name));
  return out;
}

ClosureResult closure_ok(const PackageIndex& index, const ClosureRequest& request) {
  auto r = dependency_closure(index, request);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : ClosureResult{};
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

TEST(DependencyClosure, FollowsDependsAndPreDependsButNotRecommends) {
  const PackageIndex index = index_of(pkg("app", "1",
                                          "Depends: liba\nPre-Depends: libpre\nRecommends: extra\n"
                                          "Suggests: more") +
                                      pkg("liba", "1", "Depends: libb (>= 1)") + pkg("libb", "2") + pkg("libpre", "1") +
                                      pkg("extra", "1") + pkg("more", "1") + pkg("unrelated", "1"));
  EXPECT_EQ(names(closure_ok(index, req({"app"}))), (std::vector<std::string>{"app", "liba", "libb", "libpre"}));
}

TEST(DependencyClosure, RequiredSetAddsEssentialAndRequiredPackages) {
  const PackageIndex index = index_of(pkg("app", "1") + pkg("base-files", "12", "Essential: yes") +
                                      "Package: libreq\nVersion: 1\nArchitecture: amd64\nPriority: required\n"
                                      "Depends: libdep\n\n" +
                                      pkg("libdep", "1") + pkg("optional-thing", "1"));
  EXPECT_EQ(names(closure_ok(index, req({"app"}, true))),
            (std::vector<std::string>{"app", "base-files", "libdep", "libreq"}));
  EXPECT_EQ(names(closure_ok(index, req({"app"}, false))), (std::vector<std::string>{"app"}));
  EXPECT_EQ(names(closure_ok(index, req({}, true))), (std::vector<std::string>{"base-files", "libdep", "libreq"}));
}

// A slim base: dependencies on maintainer-script tools count as met and install nothing, with a line saying so.
TEST(DependencyClosure, ALeftOutPackageMeetsDependenciesWithoutBeingInstalled) {
  const PackageIndex index = index_of(
      pkg("python3-minimal", "3.11", "Depends: dpkg (>= 1.13.20)") + pkg("dpkg", "1.21", "Depends: libmd0\nEssential: yes") +
      pkg("libmd0", "1") + pkg("tzdata", "2024a", "Depends: debconf (>= 0.5) | debconf-2.0") +
      pkg("debconf", "1.5", "Provides: debconf-2.0\nDepends: perl-base") + pkg("perl-base", "5.36") +
      pkg("readline-common", "8", "Depends: dpkg (>= 1.15.4) | install-info") + pkg("install-info", "6.8") +
      pkg("needs-virtual", "1", "Depends: debconf-2.0") + pkg("too-new", "1", "Depends: dpkg (>= 9)"));
  ClosureRequest r = req({"python3-minimal", "tzdata", "readline-common", "needs-virtual"});
  r.left_out = {"dpkg", "debconf", "install-info"};
  const ClosureResult out = closure_ok(index, r);
  EXPECT_EQ(names(out), (std::vector<std::string>{"needs-virtual", "python3-minimal", "readline-common", "tzdata"}));
  EXPECT_TRUE(any_contains(out.decisions, "python3-minimal 3.11: 'dpkg (>= 1.13.20)' is left out (dpkg 1.21 serves maintainer scripts"))
      << ::testing::PrintToString(out.decisions);
  EXPECT_TRUE(any_contains(out.decisions, "needs-virtual 1: 'debconf-2.0' is left out (debconf 1.5"));  // through Provides
  // Without left_out the same request pulls in the tools and what they need.
  const ClosureResult full = closure_ok(index, req({"python3-minimal", "tzdata", "readline-common"}));
  EXPECT_EQ(names(full), (std::vector<std::string>{"debconf", "dpkg", "libmd0", "perl-base", "python3-minimal", "readline-common", "tzdata"}));
  // A version the left-out candidate does not meet is not met: the dependency is resolved as usual, and fails.
  ClosureRequest bad = req({"too-new"});
  bad.left_out = {"dpkg"};
  auto e = dependency_closure(index, bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().id, "apt.unsatisfiable");
  // A request naming a left-out package installs it, and it then meets dependencies as itself.
  ClosureRequest asked = req({"python3-minimal", "dpkg"});
  asked.left_out = {"dpkg"};
  EXPECT_EQ(names(closure_ok(index, asked)), (std::vector<std::string>{"dpkg", "libmd0", "python3-minimal"}));
}

TEST(DependencyClosure, InstallsTheCandidateVersion) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: lib (>= 1)") + pkg("lib", "1.5") + pkg("lib", "2") + pkg("lib", "1"));
  const ClosureResult r = closure_ok(index, req({"app"}));
  ASSERT_EQ(r.packages.size(), 2u);
  EXPECT_EQ(r.packages[1]->version.str(), "2");
}

TEST(DependencyClosure, AnOlderVersionIsNotUsedWhenTheCandidateFailsAConstraint) {
  // apt only ever installs candidates; so does gpuenv.
  const PackageIndex index = index_of(pkg("app", "1", "Depends: lib (<< 2)") + pkg("lib", "1") + pkg("lib", "2"));
  auto r = dependency_closure(index, req({"app"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
  EXPECT_EQ(r.error().kind, ErrorKind::unsatisfiable);
  EXPECT_NE(r.error().message.find("app depends on lib (<< 2)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("candidate lib 2"), std::string::npos) << r.error().message;
}

TEST(DependencyClosure, APinnedRequestInstallsThatVersion) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: lib (<< 2)") + pkg("lib", "1") + pkg("lib", "2"));
  const ClosureResult r = closure_ok(index, req({"app", "lib=1"}));
  ASSERT_EQ(r.packages.size(), 2u);
  EXPECT_EQ(r.packages[1]->version.str(), "1");
}

TEST(DependencyClosure, APinThatBreaksADependencyIsReported) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: lib (>= 2)") + pkg("lib", "1") + pkg("lib", "2"));
  auto r = dependency_closure(index, req({"lib=1", "app"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
  // The pin makes lib 1 the candidate, as apt-get does with name=version.
  EXPECT_NE(r.error().message.find("the candidate lib 1 does not satisfy 'lib (>= 2)'"), std::string::npos)
      << r.error().message;
}

TEST(DependencyClosure, MissingDependencyNamesTheChain) {
  const PackageIndex index = index_of(pkg("python3", "3.11.2-1", "Depends: libpython3-stdlib") +
                                      pkg("libpython3-stdlib", "3.11.2-1", "Depends: python3.11 (>= 3.11.2-1~)"));
  auto r = dependency_closure(index, req({"python3"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
  EXPECT_NE(
      r.error().message.find("libpython3-stdlib depends on python3.11 (>= 3.11.2-1~), which no repository provides"),
      std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("needed by python3"), std::string::npos) << r.error().message;
  EXPECT_FALSE(r.error().hint.empty());
}

TEST(DependencyClosure, DirectMissingDependencyOfARequest) {
  const PackageIndex index = index_of(pkg("python3", "3.11.2-1", "Depends: python3.11 (>= 3.11.2-1~)"));
  auto r = dependency_closure(index, req({"python3"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "python3 depends on python3.11 (>= 3.11.2-1~), which no repository provides");
}

TEST(DependencyClosure, TheFirstInstallableAlternativeWins) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: x | y") + pkg("x", "1") + pkg("y", "1"));
  const ClosureResult r = closure_ok(index, req({"app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "x"}));
  EXPECT_TRUE(any_contains(r.decisions, "'x | y' -> x 1 (first alternative)")) << ::testing::PrintToString(r.decisions);
}

TEST(DependencyClosure, AnAlreadySelectedAlternativeWins) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: x | y") + pkg("x", "1") + pkg("y", "1"));
  const ClosureResult r = closure_ok(index, req({"app", "y"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "y"}));
  EXPECT_TRUE(any_contains(r.decisions, "'x | y' is satisfied by y 1, already selected"))
      << ::testing::PrintToString(r.decisions);
}

TEST(DependencyClosure, AnAlternativeThatIsNotAvailableIsSkipped) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: gone | x (>= 2) | y") + pkg("x", "1") + pkg("y", "1"));
  const ClosureResult r = closure_ok(index, req({"app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "y"}));
  EXPECT_TRUE(any_contains(r.decisions, "-> y 1 (alternative 3 of 3")) << ::testing::PrintToString(r.decisions);
}

TEST(DependencyClosure, AnAlternativeWhoseDependenciesCannotBeMetIsSkipped) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: x | y") + pkg("x", "1", "Depends: missing") + pkg("y", "1"));
  const ClosureResult r = closure_ok(index, req({"app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "y"}));
  EXPECT_TRUE(any_contains(r.decisions, "x 1 cannot be installed (x depends on missing"))
      << ::testing::PrintToString(r.decisions);
}

TEST(DependencyClosure, ARealPackageBeatsProvidersOfTheSameName) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: mta") + pkg("mta", "1") +
                                      "Package: other\nVersion: 1\nArchitecture: amd64\nPriority: required\n"
                                      "Provides: mta\n\n");
  const ClosureResult r = closure_ok(index, req({"app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "mta"}));
  EXPECT_TRUE(any_contains(r.decisions,
                           "'mta' -> mta 1 (first alternative; the real package, which apt prefers to its "
                           "providers other)"))
      << ::testing::PrintToString(r.decisions);
}

TEST(DependencyClosure, ProvidersAreChosenByEssentialThenPriorityThenName) {
  const std::string providers = pkg("gawk", "1", "Provides: awk") + pkg("original-awk", "1", "Provides: awk") +
                                pkg("busybox-awk", "1", "Provides: awk");
  const PackageIndex by_name = index_of(pkg("app", "1", "Depends: awk") + providers);
  const ClosureResult r = closure_ok(by_name, req({"app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "busybox-awk"}));
  EXPECT_TRUE(any_contains(r.decisions, "provides virtual package 'awk'")) << ::testing::PrintToString(r.decisions);

  const PackageIndex by_priority =
      index_of(pkg("app", "1", "Depends: awk") + providers +
               "Package: mawk\nVersion: 1\nArchitecture: amd64\nPriority: required\nProvides: awk\n\n");
  EXPECT_EQ(names(closure_ok(by_priority, req({"app"}))), (std::vector<std::string>{"app", "mawk"}));

  const PackageIndex by_essential =
      index_of(pkg("app", "1", "Depends: awk") + providers +
               "Package: mawk\nVersion: 1\nArchitecture: amd64\nPriority: required\nProvides: awk\n\n" +
               "Package: zawk\nVersion: 1\nArchitecture: amd64\nPriority: optional\nEssential: yes\nProvides: awk\n\n");
  EXPECT_EQ(names(closure_ok(by_essential, req({"app"}))), (std::vector<std::string>{"app", "zawk"}));
}

TEST(DependencyClosure, ASelectedProviderSatisfiesAVirtualDependency) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: awk") + pkg("gawk", "1", "Provides: awk") + pkg("mawk", "1", "Provides: awk"));
  const ClosureResult r = closure_ok(index, req({"gawk", "app"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"app", "gawk"}));
  EXPECT_TRUE(any_contains(r.decisions, "'awk' is satisfied by gawk 1 (a provider), already selected"))
      << ::testing::PrintToString(r.decisions);
  EXPECT_EQ(names(closure_ok(index, req({"app", "mawk"}))), (std::vector<std::string>{"app", "mawk"}));
}

TEST(DependencyClosure, AVersionedDependencyNeedsAVersionedProvides) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: api (>= 2)") + pkg("unversioned", "9", "Provides: api") +
               pkg("old", "1", "Provides: api (= 1)") + pkg("new", "1", "Provides: api (= 2)"));
  EXPECT_EQ(names(closure_ok(index, req({"app"}))), (std::vector<std::string>{"app", "new"}));

  const PackageIndex none = index_of(pkg("app", "1", "Depends: api (>= 2)") + pkg("unversioned", "9", "Provides: api"));
  auto r = dependency_closure(none, req({"app"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
  EXPECT_NE(r.error().message.find("provided only by unversioned"), std::string::npos) << r.error().message;
}

TEST(DependencyClosure, AnyQualifierNeedsMultiArchAllowed) {
  const PackageIndex ok =
      index_of(pkg("app", "1", "Depends: python3:any") + pkg("python3", "3", "Multi-Arch: allowed"));
  EXPECT_EQ(names(closure_ok(ok, req({"app"}))), (std::vector<std::string>{"app", "python3"}));

  const PackageIndex bad = index_of(pkg("app", "1", "Depends: python3:any") + pkg("python3", "3"));
  auto r = dependency_closure(bad, req({"app"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
  EXPECT_NE(r.error().message.find("Multi-Arch: no"), std::string::npos) << r.error().message;
}

TEST(DependencyClosure, NativeAndExplicitArchitectureQualifiers) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: a:native, b:amd64") + pkg("a", "1", "", "all") + pkg("b", "1"));
  EXPECT_EQ(names(closure_ok(index, req({"app"}))), (std::vector<std::string>{"a", "app", "b"}));

  const PackageIndex foreign = index_of(pkg("app", "1", "Depends: b:arm64") + pkg("b", "1"));
  auto r = dependency_closure(foreign, req({"app"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsatisfiable");
}

TEST(DependencyClosure, ConflictsBetweenRequestedPackagesAreReported) {
  const PackageIndex index = index_of(pkg("a", "1", "Conflicts: b (<< 2)") + pkg("b", "1"));
  auto r = dependency_closure(index, req({"a", "b"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.conflict");
  EXPECT_EQ(r.error().kind, ErrorKind::unsatisfiable);
  EXPECT_NE(r.error().message.find("a 1 Conflicts: b (<< 2)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("b 1"), std::string::npos) << r.error().message;
}

TEST(DependencyClosure, BreaksAreReportedInEitherDirection) {
  const PackageIndex index = index_of(pkg("a", "1", "Depends: c") + pkg("b", "1", "Breaks: c") + pkg("c", "1"));
  auto r = dependency_closure(index, req({"a", "b"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.conflict");
  EXPECT_NE(r.error().message.find("b 1 Breaks: c"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("c 1 is wanted by a"), std::string::npos) << r.error().message;
}

TEST(DependencyClosure, AConflictOnAVirtualNameHitsItsProviders) {
  const PackageIndex index =
      index_of(pkg("postfix", "1", "Provides: mail-transport-agent\nConflicts: mail-transport-agent") +
               pkg("exim4", "1", "Provides: mail-transport-agent"));
  auto r = dependency_closure(index, req({"postfix", "exim4"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.conflict");
  // A package conflicting with a name it provides itself is fine alone.
  EXPECT_EQ(names(closure_ok(index, req({"postfix"}))), (std::vector<std::string>{"postfix"}));
}

TEST(DependencyClosure, AnAlternativeThatConflictsWithTheSelectionIsSkipped) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: x | y") + pkg("x", "1", "Conflicts: base") + pkg("y", "1") + pkg("base", "1"));
  EXPECT_EQ(names(closure_ok(index, req({"base", "app"}))), (std::vector<std::string>{"app", "base", "y"}));
}

TEST(DependencyClosure, RequestsForUnknownPackagesAndVersionsFail) {
  const PackageIndex index = index_of(pkg("a", "1"));
  auto unknown = dependency_closure(index, req({"nope"}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().id, "apt.unknown_package");
  auto version = dependency_closure(index, req({"a=2"}));
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.error().id, "apt.unknown_package");
  EXPECT_NE(version.error().message.find("it has 1"), std::string::npos) << version.error().message;
}

TEST(DependencyClosure, AVirtualRequestNeedsExactlyOneProvider) {
  const PackageIndex one = index_of(pkg("mawk", "1", "Provides: awk"));
  const ClosureResult r = closure_ok(one, req({"awk"}));
  EXPECT_EQ(names(r), (std::vector<std::string>{"mawk"}));
  EXPECT_TRUE(any_contains(r.decisions, "only provider mawk 1"));

  const PackageIndex two = index_of(pkg("mawk", "1", "Provides: awk") + pkg("gawk", "1", "Provides: awk"));
  auto several = dependency_closure(two, req({"awk"}));
  ASSERT_FALSE(several.ok());
  EXPECT_EQ(several.error().id, "apt.virtual_package");
  EXPECT_NE(several.error().message.find("gawk, mawk"), std::string::npos) << several.error().message;
}

TEST(DependencyClosure, CyclesAreFine) {
  const PackageIndex index = index_of(pkg("a", "1", "Depends: b") + pkg("b", "1", "Pre-Depends: a"));
  EXPECT_EQ(names(closure_ok(index, req({"a"}))), (std::vector<std::string>{"a", "b"}));
}

TEST(DependencyClosure, MalformedRelationFieldsAreReportedWithTheirPlace) {
  const PackageIndex index = index_of(pkg("a", "1", "Depends: b (=> 1)"));
  auto r = dependency_closure(index, req({"a"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.relation_syntax");
  EXPECT_EQ(r.error().where, "Packages:1");
}

TEST(DependencyClosure, OutputIsSortedByNameAndDeterministic) {
  const PackageIndex index = index_of(pkg("z", "1", "Depends: m | n, a") + pkg("m", "1", "Depends: b") + pkg("a", "1") +
                                      pkg("b", "1") + pkg("n", "1"));
  const ClosureResult first = closure_ok(index, req({"z"}));
  const ClosureResult second = closure_ok(index, req({"z"}));
  EXPECT_EQ(names(first), (std::vector<std::string>{"a", "b", "m", "z"}));
  EXPECT_EQ(names(first), names(second));
  EXPECT_EQ(first.decisions, second.decisions);
}

// --- Oracle: the answers apt-get recorded on Debian 12 (scripts/gen_apt_closure_oracle.sh) ------------------------

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Each tests/data/apt_closure_<set>.txt holds "# request: <packages>" and apt's answer, "name version" per line.
TEST(DependencyClosureOracle, MatchesWhatAptGetInstalls) {
  const std::filesystem::path dir = std::filesystem::path(GPUENV_SOURCE_DIR) / "tests" / "data";
  const std::string fixture = read_file((dir / "apt_closure_packages.txt").string());
  ASSERT_FALSE(fixture.empty()) << "missing " << (dir / "apt_closure_packages.txt");
  PackageIndex index;
  ASSERT_TRUE(
      index.add(fixture, RepositoryRef{"", "bookworm", "main", "apt_closure_packages.txt"}, {"amd64", "all"}).ok());

  std::vector<std::filesystem::path> answers;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("apt_closure_", 0) == 0 && file != "apt_closure_packages.txt") answers.push_back(entry.path());
  }
  std::sort(answers.begin(), answers.end());
  EXPECT_GE(answers.size(), 5u);
  for (const auto& path : answers) {
    std::vector<std::string> request;
    std::vector<std::string> expected;
    std::istringstream lines(read_file(path.string()));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("# request:", 0) == 0) {
        std::istringstream words(line.substr(10));
        for (std::string w; words >> w;) request.push_back(w);
      } else if (!line.empty() && line[0] != '#') {
        expected.push_back(line);
      }
    }
    ASSERT_FALSE(request.empty()) << path << " has no '# request:' line";
    auto r = dependency_closure(index, req(request, false));
    ASSERT_TRUE(r.ok()) << path << ": " << r.error().to_string();
    std::vector<std::string> got;
    for (const BinaryPackage* p : r->packages) got.push_back(std::string(p->name) + " " + p->version.str());
    EXPECT_EQ(got, expected) << path;
  }
}

}  // namespace

// A base image's installed packages (its dpkg status) satisfy dependencies and are not installed again.
TEST(DependencyClosure, InstalledPackagesOfABaseSatisfyDependencies) {
  const PackageIndex index =
      index_of(pkg("app", "1", "Depends: libc6 (>= 2.36), libfoo | libbar, mail-transport-agent") + pkg("libc6", "2.36-9") +
               pkg("libfoo", "1") + pkg("postfix", "3", "Provides: mail-transport-agent") +
               pkg("base-files", "12", "Essential: yes") + pkg("newthing", "1", "Essential: yes"));
  const std::string status =
      "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\nArchitecture: amd64\n\n"
      "Package: libbar\nStatus: install ok installed\nVersion: 0.5\nArchitecture: amd64\n\n"
      "Package: exim4\nStatus: install ok installed\nVersion: 4.96\nArchitecture: amd64\nProvides: mail-transport-agent\n\n"
      "Package: base-files\nStatus: install ok installed\nVersion: 12.4\nArchitecture: amd64\n\n"
      "Package: removed\nStatus: deinstall ok config-files\nVersion: 1\nArchitecture: amd64\n";
  const std::string text = installed_packages_text(status);
  EXPECT_EQ(text.find("removed"), std::string::npos);
  PackageIndex installed = index_of(text);
  ClosureRequest r = req({"app", "libc6"}, true);
  r.installed = &installed;
  const ClosureResult result = closure_ok(index, r);
  // libc6, libbar (an alternative), exim4 (a provider) and base-files come from the base; newthing is new.
  EXPECT_EQ(names(result), (std::vector<std::string>{"app", "newthing"}));
  EXPECT_TRUE(any_contains(result.decisions, "libc6: already installed in the base (libc6 2.36-9)"));
}

TEST(DependencyClosure, AnInstalledVersionTooOldForADependencyIsNotEnough) {
  const PackageIndex index = index_of(pkg("app", "1", "Depends: libc6 (>= 2.36)") + pkg("libc6", "2.36-9"));
  PackageIndex installed = index_of(installed_packages_text(
      "Package: libc6\nStatus: install ok installed\nVersion: 2.31-13\nArchitecture: amd64\n"));
  ClosureRequest r = req({"app"});
  r.installed = &installed;
  EXPECT_EQ(names(closure_ok(index, r)), (std::vector<std::string>{"app", "libc6"}));
}
