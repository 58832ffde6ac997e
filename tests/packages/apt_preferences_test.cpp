#include "packages/apt/apt_preferences.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/fake_fetcher.hpp"
#include "fakes/fake_runner.hpp"
#include "packages/apt/closure.hpp"
#include "packages/apt/deb822.hpp"
#include "packages/apt/package_index.hpp"
#include "packages/apt/pin.hpp"
#include "base/cache/blob_store.hpp"
#include "base/digest.hpp"

using gpuenv::packages::AptFetchContext;
using gpuenv::packages::AptPinRequest;
using gpuenv::packages::AptPreferences;
using gpuenv::packages::AptSource;
using gpuenv::packages::BinaryPackage;
using gpuenv::packages::ClosureRequest;
using gpuenv::packages::default_priority;
using gpuenv::packages::dependency_closure;
using gpuenv::packages::k_pin_never;
using gpuenv::packages::PackageIndex;
using gpuenv::packages::parse_apt_preferences;
using gpuenv::packages::parse_release;
using gpuenv::packages::PinVersion;
using gpuenv::packages::ReleaseInfo;
using gpuenv::packages::RepositoryRef;
using gpuenv::packages::uri_site;

namespace fs = std::filesystem;

namespace {

AptPreferences prefs(std::string_view text) {
  auto r = parse_apt_preferences(text, "preferences");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : AptPreferences{};
}

gpuenv::Error prefs_error(std::string_view text) {
  auto r = parse_apt_preferences(text, "preferences");
  EXPECT_FALSE(r.ok()) << "accepted:\n" << text;
  return r.ok() ? gpuenv::Error{} : r.error();
}

// One record: Package, Pin and Pin-Priority.
std::string record(const std::string& package, const std::string& pin, const std::string& priority) {
  return "Package: " + package + "\nPin: " + pin + "\nPin-Priority: " + priority + "\n\n";
}

ReleaseInfo release(std::string archive, std::string codename = "", std::string version = "") {
  ReleaseInfo r;
  r.archive = std::move(archive);
  r.codename = std::move(codename);
  r.version = std::move(version);
  r.origin = "Debian";
  r.label = "Debian";
  r.component = "main";
  r.architecture = "amd64";
  r.site = "mirror.example.com";
  return r;
}

// A version listed by the given files.
PinVersion version_in(std::string_view name, std::string_view version, const std::vector<const ReleaseInfo*>& files,
                      std::string_view arch = "amd64", std::string_view source = "") {
  return PinVersion{name, version, arch, source, files};
}

// --- parsing -------------------------------------------------------------------------------------------------------

TEST(AptPreferencesParser, ReadsRecordsWithExplanationsAndComments) {
  const AptPreferences p = prefs(
      "# pin the stable release\n"
      "Explanation: keep stable\n"
      "Explanation: above everything else\n"
      "Package: *\n"
      "Pin: release a=stable, n=bookworm\n"
      "Pin-Priority: 900\n"
      "\n"
      "\n"
      "# a comment between records\n"
      "Package: perl libperl5.36\n"
      "Pin: version 5.36*\n"
      "Pin-Priority: 1001\n"
      "\n"
      "package: curl\n"
      "pin: ORIGIN \"mirror.example.com\"\n"
      "pin-priority: -1\n");
  ASSERT_EQ(p.records().size(), 3u);
  const auto& general = p.records()[0];
  EXPECT_TRUE(general.packages.empty());
  EXPECT_EQ(general.kind, AptPreferences::PinKind::release);
  EXPECT_EQ(general.value, "a=stable, n=bookworm");
  EXPECT_EQ(general.priority, 900);
  EXPECT_EQ(general.where, "preferences:2");
  EXPECT_EQ(p.records()[1].packages, (std::vector<std::string>{"perl", "libperl5.36"}));
  EXPECT_EQ(p.records()[1].kind, AptPreferences::PinKind::version);
  EXPECT_EQ(p.records()[1].value, "5.36*");
  EXPECT_EQ(p.records()[1].where, "preferences:10");
  EXPECT_EQ(p.records()[2].kind, AptPreferences::PinKind::origin);
  EXPECT_EQ(p.records()[2].priority, -1);
  EXPECT_TRUE(p.has_specific());
}

TEST(AptPreferencesParser, EmptyTextAndCommentsGiveNoRecords) {
  EXPECT_TRUE(prefs("").empty());
  EXPECT_TRUE(prefs("# nothing here\n\n# still nothing\n").empty());
  EXPECT_FALSE(prefs(record("*", "release a=stable", "500")).has_specific());
}

TEST(AptPreferencesParser, ReportsAMissingPinPriorityWithTheRecordsLine) {
  const auto e = prefs_error(record("*", "release a=stable", "500") + "Package: curl\nPin: release a=stable\n");
  EXPECT_EQ(e.id, "apt.preferences_missing_field");
  EXPECT_EQ(e.where, "preferences:5");
  EXPECT_NE(e.message.find("Pin-Priority"), std::string::npos) << e.message;
  EXPECT_EQ(e.kind, gpuenv::ErrorKind::environment);
  EXPECT_FALSE(e.hint.empty());
}

TEST(AptPreferencesParser, ReportsMissingPackageAndPin) {
  EXPECT_EQ(prefs_error("Explanation: only this\n").id, "apt.preferences_missing_field");
  const auto no_pin = prefs_error("Package: curl\nPin-Priority: 5\n");
  EXPECT_EQ(no_pin.id, "apt.preferences_missing_field");
  EXPECT_NE(no_pin.message.find("Pin field"), std::string::npos) << no_pin.message;
}

TEST(AptPreferencesParser, RejectsPrioritiesAptRejectsOrMisreads) {
  for (const char* bad : {"12x", "ten", "1.5", "0", "40000", "-40000", "99999999999999999999"}) {
    const auto e = prefs_error("Package: curl\nPin: release a=stable\nPin-Priority: " + std::string(bad) + "\n");
    EXPECT_EQ(e.id, "apt.preferences_bad_priority") << bad;
    EXPECT_EQ(e.where, "preferences:3") << bad;
  }
  EXPECT_EQ(prefs_error(record("curl", "release a=stable", "never")).id, "apt.preferences_bad_priority");
}

TEST(AptPreferencesParser, AcceptsSignedPrioritiesAndNeverForGeneralRecords) {
  EXPECT_EQ(prefs(record("curl", "release a=stable", "+5")).records()[0].priority, 5);
  EXPECT_EQ(prefs(record("curl", "release a=stable", "-10")).records()[0].priority, -10);
  EXPECT_EQ(prefs(record("curl", "release a=stable", "32767")).records()[0].priority, 32767);
  // apt keeps -32768 for `never` and raises a written -32768 by one.
  EXPECT_EQ(prefs(record("curl", "release a=stable", "-32768")).records()[0].priority, -32767);
  EXPECT_EQ(prefs(record("*", "release a=stable", "never")).records()[0].priority, k_pin_never);
}

TEST(AptPreferencesParser, RejectsUnknownPinKindsAtThePinLine) {
  const auto e = prefs_error("Package: curl\nPin: bogus stable\nPin-Priority: 5\n");
  EXPECT_EQ(e.id, "apt.preferences_bad_pin");
  EXPECT_EQ(e.where, "preferences:2");
  EXPECT_NE(e.message.find("bogus"), std::string::npos) << e.message;
}

TEST(AptPreferencesParser, RejectsVersionPinsInGeneralRecords) {
  EXPECT_EQ(prefs_error(record("*", "version 1.0*", "500")).id, "apt.preferences_bad_pin");
}

TEST(AptPreferencesParser, RejectsReleaseTermsAptWouldIgnore) {
  EXPECT_EQ(prefs_error(record("*", "release a=stable, x=1", "500")).id, "apt.preferences_bad_pin");
  EXPECT_EQ(prefs_error(record("*", "release a=stable, bookworm", "500")).id, "apt.preferences_bad_pin");
  EXPECT_EQ(prefs_error(record("*", "release c=", "500")).id, "apt.preferences_bad_pin");
  EXPECT_EQ(prefs_error(record("*", "release", "500")).id, "apt.preferences_bad_pin");
}

TEST(AptPreferencesParser, RejectsBadRegularExpressions) {
  EXPECT_EQ(prefs_error(record("/lib(/", "release a=stable", "500")).id, "apt.preferences_bad_regex");
  EXPECT_EQ(prefs_error(record("*", "release o=/De(/", "500")).id, "apt.preferences_bad_regex");
}

TEST(AptPreferencesParser, RejectsLinesThatAreNotFields) {
  const auto e = prefs_error("Package: curl\nthis is not a field\n");
  EXPECT_EQ(e.id, "apt.preferences_syntax");
  EXPECT_EQ(e.where, "preferences:2");
  EXPECT_EQ(prefs_error(" continued\n").id, "apt.preferences_syntax");
  const auto twice = prefs_error("Package: curl\nPin: release a=stable\nPin: release a=testing\nPin-Priority: 5\n");
  EXPECT_EQ(twice.id, "apt.preferences_syntax");
  EXPECT_EQ(twice.where, "preferences:3");
}

TEST(AptPreferencesParser, AppendKeepsTheOrderOfFiles) {
  AptPreferences p = prefs(record("*", "release a=stable", "700"));
  p.append(prefs(record("*", "release o=Debian", "100") + record("curl", "release a=stable", "50")));
  ASSERT_EQ(p.records().size(), 3u);
  const ReleaseInfo stable = release("stable");
  EXPECT_EQ(p.file_priority(stable), 700);  // the first file's record comes first
  const std::vector<const ReleaseInfo*> files{&stable};
  EXPECT_EQ(p.specific_priority(version_in("curl", "1", files)), 50);
}

// --- priorities ----------------------------------------------------------------------------------------------------

TEST(AptPriority, DefaultsFollowTheReleaseFlags) {
  ReleaseInfo r = release("stable");
  EXPECT_EQ(default_priority(r), 500);
  r.not_automatic = true;
  EXPECT_EQ(default_priority(r), 1);
  r.but_automatic_upgrades = true;
  EXPECT_EQ(default_priority(r), 100);
  r.not_automatic = false;
  EXPECT_EQ(default_priority(r), 100);  // apt 2.6 reads ButAutomaticUpgrades alone too (the oracle shows it)
  EXPECT_EQ(AptPreferences{}.file_priority(r), 100);
  EXPECT_EQ(AptPreferences{}.file_priority(release("stable")), 500);
}

TEST(AptPriority, TheFirstMatchingGeneralRecordWins) {
  const AptPreferences p = prefs(record("*", "release a=stable", "50") + record("*", "release o=Debian", "600"));
  EXPECT_EQ(p.file_priority(release("stable")), 50);
  EXPECT_EQ(p.file_priority(release("testing")), 600);
  ReleaseInfo other = release("stable");
  other.origin = "Other";
  EXPECT_EQ(p.file_priority(other), 50);
  other.archive = "testing";
  EXPECT_EQ(p.file_priority(other), 500);
}

TEST(AptPriority, NeverOverridesEarlierGeneralRecordsAndSpecificOnes) {
  const AptPreferences p = prefs(record("*", "release a=stable", "900") + record("curl", "release a=stable", "990") +
                                 record("*", "release o=Debian", "never"));
  const ReleaseInfo stable = release("stable");
  EXPECT_EQ(p.file_priority(stable), k_pin_never);
  const std::vector<const ReleaseInfo*> files{&stable};
  EXPECT_EQ(p.priority(version_in("curl", "1", files)), k_pin_never);
  // A version also listed by a file that is not `never` keeps its specific priority.
  ReleaseInfo elsewhere = release("stable");
  elsewhere.origin = "Other";
  const std::vector<const ReleaseInfo*> both{&stable, &elsewhere};
  EXPECT_EQ(p.priority(version_in("curl", "1", both)), 990);
}

TEST(AptPriority, ReleaseTermsMatchTheirFields) {
  const ReleaseInfo r = release("stable", "bookworm", "12.5");
  auto matches = [&](const std::string& pin) { return prefs(record("*", pin, "777")).file_priority(r) == 777; };
  EXPECT_TRUE(matches("release a=stable"));
  EXPECT_TRUE(matches("release A=Stable"));  // keys and values ignore case, as in apt
  EXPECT_TRUE(matches("release n=bookworm"));
  EXPECT_TRUE(matches("release n=book*"));
  EXPECT_TRUE(matches("release v=12.5"));
  EXPECT_TRUE(matches("release v=12*"));
  EXPECT_FALSE(matches("release v=12"));  // exact unless it ends with '*'
  EXPECT_TRUE(matches("release o=Deb*"));
  EXPECT_TRUE(matches("release l=/^deb/"));
  EXPECT_TRUE(matches("release c=main"));
  EXPECT_TRUE(matches("release b=amd64"));
  EXPECT_TRUE(matches("release a=stable,n=bookworm, c=main"));
  EXPECT_FALSE(matches("release a=stable, c=contrib"));
  EXPECT_TRUE(matches("release a=testing, a=stable"));  // the last term of a kind counts
  EXPECT_TRUE(matches("release stable"));               // a bare word: archive or codename
  EXPECT_TRUE(matches("release bookworm"));
  EXPECT_TRUE(matches("release 12*"));  // a bare word starting with a digit: the version
  EXPECT_TRUE(matches("release *"));
  EXPECT_FALSE(matches("release testing"));
}

TEST(AptPriority, AbsentReleaseFieldsNeverMatchButEmptyComponentsDo) {
  ReleaseInfo flat;
  flat.archive = "fs";
  auto matches = [&](const std::string& pin) { return prefs(record("*", pin, "777")).file_priority(flat) == 777; };
  EXPECT_FALSE(matches("release n=*"));
  EXPECT_FALSE(matches("release b=*"));  // a flat repository has no architecture
  EXPECT_TRUE(matches("release c=*"));   // but an empty component
  EXPECT_TRUE(matches("origin \"\""));   // and file: URIs an empty site
  EXPECT_FALSE(matches("origin example.com"));
}

TEST(AptPriority, OriginPinsMatchTheHostOfTheUri) {
  EXPECT_EQ(uri_site("http://127.0.0.1:8080/debian/"), "127.0.0.1");
  EXPECT_EQ(uri_site("https://user:secret@mirror.example.com/debian"), "mirror.example.com");
  EXPECT_EQ(uri_site("http://[::1]:80/debian/"), "::1");
  EXPECT_EQ(uri_site("file:/srv/repo/"), "");
  EXPECT_EQ(uri_site("file:///srv/repo/"), "");
  const ReleaseInfo r = release("stable");
  EXPECT_EQ(prefs(record("*", "origin \"mirror.example.com\"", "990")).file_priority(r), 990);
  EXPECT_EQ(prefs(record("*", "origin mirror.example.com", "990")).file_priority(r), 990);
  EXPECT_EQ(prefs(record("*", "origin *.example.com", "990")).file_priority(r), 990);
  EXPECT_EQ(prefs(record("*", "origin other.example.com", "990")).file_priority(r), 500);
}

TEST(AptPriority, TheFirstMatchingSpecificRecordWins) {
  const AptPreferences p = prefs(record("curl", "release a=testing", "100") + record("curl libcurl4", "release a=stable", "200") +
                                 record("curl", "release o=Debian", "300"));
  const ReleaseInfo stable = release("stable");
  const std::vector<const ReleaseInfo*> files{&stable};
  EXPECT_EQ(p.specific_priority(version_in("curl", "1", files)), 200);
  EXPECT_EQ(p.specific_priority(version_in("libcurl4", "1", files)), 200);
  EXPECT_EQ(p.specific_priority(version_in("wget", "1", files)), std::nullopt);
  EXPECT_EQ(p.priority(version_in("wget", "1", files)), 500);
}

TEST(AptPriority, PackageWordsMayBeGlobsRegexesSourcesAndArchitectures) {
  const AptPreferences p = prefs(record("lib*", "release a=stable", "601") + record("/^py/", "release a=stable", "602") +
                                 record("src:glibc", "release a=stable", "603") +
                                 record("zlib1g:i386", "release a=stable", "604") +
                                 record("tzdata:any", "release a=stable", "605"));
  const ReleaseInfo stable = release("stable");
  const std::vector<const ReleaseInfo*> f{&stable};
  EXPECT_EQ(p.specific_priority(version_in("libssl3", "3", f)), 601);
  EXPECT_EQ(p.specific_priority(version_in("python3", "3", f)), 602);
  EXPECT_EQ(p.specific_priority(version_in("PyYAML", "3", f)), 602);  // regexes ignore case
  EXPECT_EQ(p.specific_priority(version_in("libc-bin", "2.36", f, "amd64", "glibc")), 601);  // lib* comes first
  EXPECT_EQ(p.specific_priority(version_in("locales", "2.36", f, "all", "glibc (2.36-9)")), 603);
  EXPECT_EQ(p.specific_priority(version_in("zlib1g", "1", f)), std::nullopt);  // not the native architecture
  EXPECT_EQ(p.specific_priority(version_in("zlib1g", "1", f, "i386")), 604);
  EXPECT_EQ(p.specific_priority(version_in("tzdata", "1", f, "all")), 605);
  EXPECT_EQ(p.specific_priority(version_in("gcc", "1", f)), std::nullopt);
}

TEST(AptPriority, VersionPinsCompareTheWholeVersionOrAPrefix) {
  const AptPreferences p = prefs(record("perl", "version 5.36*", "1001") + record("curl", "version 7.88.1-10", "990") +
                                 record("bash", "version 5.*-6", "980") + record("gawk", "version 1:5*", "970"));
  const std::vector<const ReleaseInfo*> none;
  EXPECT_EQ(p.specific_priority(version_in("perl", "5.36.0-7", none)), 1001);
  EXPECT_EQ(p.specific_priority(version_in("perl", "5.38.0-1", none)), std::nullopt);
  EXPECT_EQ(p.specific_priority(version_in("curl", "7.88.1-10", none)), 990);
  EXPECT_EQ(p.specific_priority(version_in("curl", "7.88.1-10+deb12u5", none)), std::nullopt);
  EXPECT_EQ(p.specific_priority(version_in("bash", "5.2.15-6", none)), 980);  // a glob inside
  EXPECT_EQ(p.specific_priority(version_in("gawk", "1:5.2.1-2", none)), 970);
  EXPECT_EQ(p.specific_priority(version_in("perl", "1:5.36.0-7", none)), std::nullopt);  // epochs are compared too
}

// --- candidates ----------------------------------------------------------------------------------------------------

// A repository of the index: Release fields as pin.cpp fills them.
RepositoryRef repo(std::string archive, bool not_automatic = false, bool but_automatic_upgrades = false) {
  RepositoryRef r{"http://127.0.0.1/debian/", archive, "main", archive + "/Packages"};
  r.archive = archive;
  r.codename = archive == "stable" ? "bookworm" : archive == "experimental" ? "rc-buggy" : archive;
  r.version = archive == "stable" ? "12.5" : "";
  r.origin = "Debian";
  r.label = "Debian";
  r.architecture = "amd64";
  r.not_automatic = not_automatic;
  r.but_automatic_upgrades = but_automatic_upgrades;
  return r;
}

std::string pkg(const std::string& name, const std::string& version, const std::string& extra = "") {
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\n" + extra + "\n";
}

void add(PackageIndex& index, const std::string& text, RepositoryRef ref) {
  auto st = index.add(text, std::move(ref), {"amd64", "all"});
  ASSERT_TRUE(st.ok()) << st.error().to_string();
}

std::string candidate_version(const PackageIndex& index, std::string_view name) {
  const BinaryPackage* c = index.candidate(name);
  return c == nullptr ? "(none)" : c->version.str();
}

TEST(AptCandidate, ANotAutomaticRepositoryLosesEvenWithAHigherVersion) {
  PackageIndex index;
  add(index, pkg("foo", "1.0"), repo("stable"));
  add(index, pkg("foo", "2.0") + pkg("only-there", "1"), repo("experimental", true));
  add(index, pkg("foo", "1.5"), repo("backports", true, true));
  EXPECT_EQ(candidate_version(index, "foo"), "1.0");
  const auto v = index.versions("foo");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(index.priority(*v[0]), 1);
  EXPECT_EQ(index.priority(*v[1]), 100);
  EXPECT_EQ(index.priority(*v[2]), 500);
  EXPECT_EQ(candidate_version(index, "only-there"), "1");  // priority 1 is still a candidate
}

TEST(AptCandidate, ButAutomaticUpgradesBeatsNotAutomatic) {
  PackageIndex index;
  add(index, pkg("foo", "2.0"), repo("experimental", true));
  add(index, pkg("foo", "1.5"), repo("backports", true, true));
  EXPECT_EQ(candidate_version(index, "foo"), "1.5");
}

TEST(AptCandidate, AReleasePinAt990MakesAnOlderVersionTheCandidate) {
  PackageIndex index;
  add(index, pkg("foo", "1.0"), repo("stable"));
  add(index, pkg("foo", "2.0"), repo("testing"));
  EXPECT_EQ(candidate_version(index, "foo"), "2.0");
  index.set_preferences(prefs(record("*", "release a=stable", "990")));
  EXPECT_EQ(candidate_version(index, "foo"), "1.0");
  EXPECT_EQ(index.priority(*index.versions("foo")[0]), 500);
  EXPECT_EQ(index.priority(*index.versions("foo")[1]), 990);
  index.set_preferences(AptPreferences{});  // replaced, not merged
  EXPECT_EQ(candidate_version(index, "foo"), "2.0");
}

TEST(AptCandidate, PreferencesSetBeforeAddingApplyToLaterRepositories) {
  PackageIndex index;
  index.set_preferences(prefs(record("*", "release a=stable", "990")));
  add(index, pkg("foo", "1.0"), repo("stable"));
  add(index, pkg("foo", "2.0"), repo("testing"));
  EXPECT_EQ(candidate_version(index, "foo"), "1.0");
}

TEST(AptCandidate, NegativePrioritiesAreNeverTheCandidate) {
  PackageIndex index;
  add(index, pkg("foo", "1.0") + pkg("bar", "1.0"), repo("stable"));
  add(index, pkg("foo", "2.0"), repo("testing"));
  index.set_preferences(prefs(record("*", "release a=testing", "-1") + record("bar", "release a=stable", "-10")));
  EXPECT_EQ(candidate_version(index, "foo"), "1.0");
  EXPECT_EQ(index.candidate("bar"), nullptr);
  EXPECT_EQ(index.versions("bar").size(), 1u);  // still indexed

  // A request for it fails the way apt-get does ("has no installation candidate").
  ClosureRequest request;
  request.packages = {"bar"};
  request.required_set = false;
  auto r = dependency_closure(index, request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.no_candidate");
  request.packages = {"bar=1.0"};  // an explicit version is still allowed
  EXPECT_TRUE(dependency_closure(index, request).ok());
}

TEST(AptCandidate, ASpecificPinBeatsAGeneralOne) {
  PackageIndex index;
  add(index, pkg("foo", "1.0") + pkg("bar", "1.0"), repo("stable"));
  add(index, pkg("foo", "2.0") + pkg("bar", "2.0"), repo("testing"));
  index.set_preferences(prefs(record("*", "release a=stable", "900") + record("foo", "release a=testing", "950")));
  EXPECT_EQ(candidate_version(index, "foo"), "2.0");
  EXPECT_EQ(candidate_version(index, "bar"), "1.0");
}

TEST(AptCandidate, VersionGlobPinsSelectAMatchingVersion) {
  PackageIndex index;
  add(index, pkg("foo", "1.2.3-1") + pkg("foo", "1.3.0-1"), repo("stable"));
  add(index, pkg("foo", "2.0-1"), repo("testing"));
  index.set_preferences(prefs(record("foo", "version 1.2*", "1001")));
  EXPECT_EQ(candidate_version(index, "foo"), "1.2.3-1");
  index.set_preferences(prefs(record("foo", "version 1.*", "600")));
  EXPECT_EQ(candidate_version(index, "foo"), "1.3.0-1");  // the highest version among equal priorities
}

TEST(AptCandidate, IdenticalInstancesShareTheHighestPriority) {
  PackageIndex index;
  add(index, pkg("foo", "1.0"), repo("experimental", true));
  add(index, pkg("foo", "1.0"), repo("stable"));
  add(index, pkg("foo", "0.9"), repo("testing"));
  const auto v = index.versions("foo");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(index.priority(*v[0]), 500);
  EXPECT_EQ(index.priority(*v[1]), 500);
  // The candidate is 1.0, taken from the repository that gives it its priority.
  ASSERT_NE(index.candidate("foo"), nullptr);
  EXPECT_EQ(index.repositories()[index.candidate("foo")->repository].archive, "stable");
  // Stanzas that differ in Depends are different versions to apt.
  PackageIndex other;
  add(other, pkg("bar", "1.0", "Depends: a\n"), repo("experimental", true));
  add(other, pkg("bar", "1.0", "Depends: b\n"), repo("stable"));
  EXPECT_EQ(other.priority(*other.versions("bar")[0]), 1);
  EXPECT_EQ(other.priority(*other.versions("bar")[1]), 500);
}

TEST(AptCandidate, TheClosureInstallsCandidatesAtTheirPinnedVersions) {
  PackageIndex index;
  add(index, pkg("app", "1.0", "Depends: lib (>= 1)\n") + pkg("lib", "1.0"), repo("stable"));
  add(index, pkg("app", "2.0", "Depends: lib (>= 2)\n") + pkg("lib", "2.0"), repo("experimental", true));
  ClosureRequest request;
  request.packages = {"app"};
  request.required_set = false;
  auto r = dependency_closure(index, request);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->packages.size(), 2u);
  EXPECT_EQ(r->packages[0]->version.str(), "1.0");
  EXPECT_EQ(r->packages[1]->version.str(), "1.0");
}

TEST(AptCandidate, ReleaseFilesCarryTheFlagsAndVersion) {
  auto r = parse_release(
      "Origin: Debian\nLabel: Debian Backports\nSuite: stable-backports\nCodename: bookworm-backports\n"
      "Version: 12.5\nNotAutomatic: yes\nButAutomaticUpgrades: yes\n"
      "SHA256:\n 0000000000000000000000000000000000000000000000000000000000000000 0 main/binary-amd64/Packages\n",
      "Release");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->version, "12.5");
  EXPECT_TRUE(r->not_automatic);
  EXPECT_TRUE(r->but_automatic_upgrades);
  auto plain = parse_release(
      "Suite: stable\nNotAutomatic: no\n"
      "SHA256:\n 0000000000000000000000000000000000000000000000000000000000000000 0 main/binary-amd64/Packages\n",
      "Release");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->not_automatic);
  EXPECT_FALSE(plain->but_automatic_upgrades);
  EXPECT_EQ(plain->version, "");
}

// --- pin_apt: Release flags and preferences reach the closure -----------------------------------------------------

class PinAptPriorities : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuenv-pinprefs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
    fs::create_directories(m_dir / "work");
    m_cache = gpuenv::make_dir_blob_store((m_dir / "cache").string());
    // Two trusted, unsigned repositories: stable, and experimental marked NotAutomatic.
    serve("stable", "Origin: Example\nSuite: stable\nCodename: bookworm\n",
          deb("hello", "1.0", "Depends: libfoo (>= 1)\n") + deb("libfoo", "1.0"));
    serve("experimental", "Origin: Example\nSuite: experimental\nCodename: rc-buggy\nNotAutomatic: yes\n",
          deb("hello", "2.0", "Depends: libfoo (>= 2)\n") + deb("libfoo", "2.0"));
    m_ctx.fetcher = &m_fetcher;
    m_ctx.cache = m_cache.get();
    m_ctx.runner = &m_runner;
    m_ctx.work_dir = (m_dir / "work").string();
  }
  void TearDown() override { fs::remove_all(m_dir); }

  static std::string deb(const std::string& name, const std::string& version, const std::string& extra = "") {
    return "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\n" + extra + "Filename: pool/" + name +
           "_" + version + ".deb\nSize: 1\nSHA256: " + std::string(64, 'a') + "\n\n";
  }

  void serve(const std::string& suite, const std::string& fields, const std::string& packages) {
    const std::string base = "http://127.0.0.1/debian/dists/" + suite + "/";
    m_fetcher.files[base + "main/binary-amd64/Packages"] = packages;
    m_fetcher.files[base + "Release"] = fields + "Architectures: amd64\nComponents: main\nSHA256:\n " +
                                        gpuenv::sha256_hex(packages) + " " + std::to_string(packages.size()) +
                                        " main/binary-amd64/Packages\n";
  }

  /// Opens the two suites with PREFERENCES and pins hello in them.
  gpuenv::Result<gpuenv::packages::AptPinResult> pin(std::string preferences = "") {
    gpuenv::packages::AptUniverseRequest u;
    for (const char* suite : {"stable", "experimental"}) {
      AptSource s;
      s.uri = "http://127.0.0.1/debian/";
      s.suite = suite;
      s.components = {"main"};
      s.trusted = true;
      s.where = std::string("sources.list:") + (suite[0] == 's' ? "1" : "2");
      u.sources.push_back(s);
    }
    u.preferences_text = std::move(preferences);
    u.preferences_origin = "/etc/apt/preferences";
    GPUENV_TRY(universe, gpuenv::packages::open_apt_universe(u, m_ctx));
    AptPinRequest r;
    r.packages = {"hello"};
    r.required_set = false;
    return gpuenv::packages::pin_apt(universe, r);
  }

  static std::vector<std::string> pins(const gpuenv::packages::AptPinResult& r) {
    std::vector<std::string> out;
    for (const auto& p : r.packages) out.push_back(p.name + " " + p.version);
    return out;
  }

  fs::path m_dir;
  gpuenv::testing::FakeFetcher m_fetcher;
  gpuenv::testing::FakeRunner m_runner;
  std::unique_ptr<gpuenv::BlobStore> m_cache;
  AptFetchContext m_ctx;
};

TEST_F(PinAptPriorities, ANotAutomaticReleaseIsNotInstalledByDefault) {
  auto r = pin();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(pins(*r), (std::vector<std::string>{"hello 1.0", "libfoo 1.0"}));
  EXPECT_NE(std::find(r->decisions.begin(), r->decisions.end(),
                      "hello 1.0 (pin priority 500) instead of the newer 2.0 (pin priority 1)"),
            r->decisions.end());
}

TEST_F(PinAptPriorities, PreferencesChooseTheRelease) {
  auto r = pin(record("*", "release a=experimental", "990"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(pins(*r), (std::vector<std::string>{"hello 2.0", "libfoo 2.0"}));
  EXPECT_EQ(r->packages[0].source, "http://127.0.0.1/debian/ experimental main");
}

TEST_F(PinAptPriorities, BadPreferencesFailBeforeAnythingIsFetched) {
  auto r = pin("Package: hello\nPin: release a=experimental\nPin-Priority: high\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.preferences_bad_priority");
  EXPECT_EQ(r.error().where, "/etc/apt/preferences:3");
  EXPECT_TRUE(m_fetcher.requested.empty());
}

// --- oracle: apt-cache policy on a throwaway apt root ------------------------------------------------------------

struct OracleRepo {
  std::string dir;        // under repo/; also the suite of a non-flat repository
  std::string component;  // "" for a flat repository
  std::string release;    // Release fields before the SHA256 list
  std::string packages;   // the Packages file
};

struct OracleScenario {
  std::string name;
  std::vector<OracleRepo> repos;
  std::string preferences;
  std::vector<std::string> packages;  // what to ask apt-cache policy about
};

std::string stanza(const std::string& name, const std::string& version, const std::string& extra = "",
                   const std::string& arch = "amd64") {
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: " + arch + "\n" + extra + "\n";
}

const std::string k_date = "Date: Sat, 09 Nov 2024 10:05:58 UTC\n";

std::string release_fields(const std::string& suite, const std::string& codename, const std::string& extra,
                           const std::string& origin = "Deb", const std::string& label = "Deb") {
  return "Origin: " + origin + "\nLabel: " + label + "\nSuite: " + suite + "\nCodename: " + codename + "\n" + extra +
         k_date + "Architectures: amd64\n";
}

// The three repositories most scenarios use: stable (500), experimental (NotAutomatic: 1) and backports
// (NotAutomatic and ButAutomaticUpgrades: 100).
std::vector<OracleRepo> three_repos() {
  return {
      {"stable", "main", release_fields("stable", "bookworm", "Version: 12.5\nComponents: main\n"),
       stanza("foo", "1.0") + stanza("bar", "1.0", "", "all") + stanza("libc6", "2.36-9", "Source: glibc\n") +
           stanza("libc-bin", "2.36-9", "Source: glibc (2.36-9)\n") + stanza("python3", "3.11.2-1") +
           stanza("pyyaml", "6.0-3") + stanza("gawk", "1:5.2.1-2") + stanza("perl", "5.36.0-7")},
      {"exp", "main", release_fields("experimental", "rc-buggy", "NotAutomatic: yes\nComponents: main\n"),
       stanza("foo", "2.0") + stanza("bar", "1.0", "", "all") + stanza("libc6", "2.40-1", "Source: glibc\n") +
           stanza("libc-bin", "2.40-1", "Source: glibc\n") + stanza("python3", "3.13.0-1") + stanza("pyyaml", "6.1-1") +
           stanza("gawk", "1:5.3.0-1") + stanza("perl", "5.40.0-6") + stanza("newpkg", "0.1")},
      {"bpo", "contrib",
       release_fields("stable-backports", "bookworm-backports",
                      "NotAutomatic: yes\nButAutomaticUpgrades: yes\nComponents: contrib\n", "Deb", "Debian Backports"),
       stanza("foo", "1.5") + stanza("perl", "5.38.2-1") + stanza("gawk", "1:5.2.2-1")},
  };
}

std::vector<OracleScenario> oracle_scenarios() {
  const std::vector<std::string> all{"foo",  "bar",    "libc6", "libc-bin", "python3",
                                     "pyyaml", "gawk", "perl",  "newpkg"};
  std::vector<OracleScenario> s;
  s.push_back({"defaults", three_repos(), "", all});
  {
    auto repos = three_repos();
    repos.push_back({"bauonly", "main", release_fields("bau", "bau", "ButAutomaticUpgrades: yes\nComponents: main\n", "Other"),
                     stanza("foo", "1.2") + stanza("newpkg", "0.2")});
    s.push_back({"but-automatic-upgrades-alone", repos, "", all});
  }
  s.push_back({"general-990", three_repos(), record("*", "release a=experimental", "990"), all});
  s.push_back({"first-general-wins", three_repos(),
               record("*", "release a=stable", "50") + record("*", "release o=Deb", "600") +
                   record("*", "release n=bookworm", "900"),
               all});
  s.push_back({"never-beats-specific", three_repos(),
               record("foo perl", "release a=stable", "900") + record("*", "release a=stable", "never"), all});
  s.push_back({"specific-beats-general", three_repos(),
               record("*", "release a=experimental", "100") + record("foo", "release a=experimental", "800") +
                   record("foo", "release a=stable", "999"),
               all});
  s.push_back({"negative-excludes", three_repos(),
               record("*", "release a=stable", "-1") + record("newpkg", "release a=experimental", "-5") +
                   record("bar", "release a=experimental", "-1"),
               all});
  s.push_back({"version-globs", three_repos(),
               record("perl", "version 5.38*", "1001") + record("gawk", "version 1:5.3*", "990") +
                   record("foo", "version 2.0", "700") + record("python3", "version 3.13*", "-1") +
                   record("libc6", "version 2.40*", "300"),
               all});
  s.push_back({"globs-regexes-sources", three_repos(),
               record("lib* /^PY/", "release n=rc-buggy", "700") + record("src:glibc", "release a=stable", "800") +
                   record("src:*awk*", "release a=stable-backports", "650"),
               all});
  s.push_back({"release-terms", three_repos(),
               record("foo", "release v=12", "901") + record("foo", "release 12.*", "902") +
                   record("bar", "release stable", "903") + record("perl", "release l=/backports$/", "904") +
                   record("gawk", "release c=contrib, b=amd64", "905") + record("python3", "release O=deb, A=EXP*", "906") +
                   record("libc6", "release *", "907") + record("newpkg", "release rc-buggy", "908"),
               all});
  s.push_back({"identical-instances", three_repos(),
               record("bar", "release a=experimental", "50") + record("*", "release a=stable", "400"), all});
  s.push_back({"origin-pins", three_repos(),
               record("foo", "origin \"example.com\"", "990") + record("perl", "origin \"\"", "990") +
                   record("*", "origin \"\"", "200"),
               all});
  s.push_back({"architectures", three_repos(),
               record("foo:i386", "release a=experimental", "990") + record("bar:any", "release a=experimental", "990") +
                   record("perl:amd64", "release a=experimental", "990") + record("*:any", "release a=stable", "1"),
               all});
  {
    std::vector<OracleRepo> repos = three_repos();
    repos.push_back({"flat", "", "Origin: Flat\nLabel: FL\nSuite: fs\n" + k_date, stanza("foo", "3.0") + stanza("flatonly", "1")});
    std::vector<std::string> names = all;
    names.push_back("flatonly");
    s.push_back({"flat-repository", repos,
                 record("*", "release c=*", "600") + record("foo", "release b=*", "990") +
                     record("flatonly", "release l=fl", "-1"),
                 names});
  }
  s.push_back({"first-specific-wins-across-patterns", three_repos(),
               record("f*", "release a=experimental", "300") + record("foo", "release a=experimental", "800") +
                   "package: perl\npin: RELEASE a=STABLE-backports\npin-priority: 1\n\n" +
                   record("* python3", "release o=/^de/", "2"),
               all});
  s.push_back({"ties-and-high-priorities", three_repos(),
               "# a comment\nExplanation: same priority everywhere\n" + record("*", "release o=Deb", "1001"), all});
  return s;
}

// Runs a shell command, returning its exit status and output (stdout and stderr).
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// What apt-cache policy says of one package: its candidate and "version priority" of every version.
struct AptAnswer {
  std::string candidate = "(none)";
  std::set<std::string> versions;
};

std::map<std::string, AptAnswer> parse_policy(const std::string& output) {
  std::map<std::string, AptAnswer> out;
  AptAnswer* current = nullptr;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != ' ' && line.back() == ':') {
      current = &out[line.substr(0, line.size() - 1)];
    } else if (current != nullptr && line.rfind("  Candidate: ", 0) == 0) {
      current->candidate = line.substr(13);
    } else if (current != nullptr && line.size() > 5 && line.rfind("     ", 0) == 0 && line[5] != ' ') {
      // "     2.0 500": a version line (file lines are indented further)
      std::istringstream words(line);
      std::string version, priority;
      words >> version >> priority;
      current->versions.insert(version + " " + priority);
    }
  }
  return out;
}

class AptOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run("command -v apt-get && command -v apt-cache").first != 0) GTEST_SKIP() << "apt-get is not installed";
    std::string tmpl = (fs::temp_directory_path() / "gpuenv-aptprefs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
  }
  void TearDown() override {
    if (!m_dir.empty()) fs::remove_all(m_dir);
  }

  // Builds the apt root of one scenario, runs apt-get update and apt-cache policy, and returns apt's answers.
  std::map<std::string, AptAnswer> ask_apt(const OracleScenario& sc) {
    const fs::path root = m_dir / sc.name;
    fs::create_directories(root / "etc/apt/preferences.d");
    fs::create_directories(root / "etc/apt/apt.conf.d");
    fs::create_directories(root / "var/lib/apt/lists/partial");
    fs::create_directories(root / "var/cache/apt/archives/partial");
    write_file(root / "var/lib/dpkg/status", "");
    write_file(root / "etc/apt/preferences", sc.preferences);
    std::string sources;
    for (const OracleRepo& r : sc.repos) {
      const fs::path base = root / "repo" / r.dir;
      if (r.component.empty()) {
        write_file(base / "Packages", r.packages);
        write_file(base / "Release", r.release + "SHA256:\n " + gpuenv::sha256_hex(r.packages) + " " +
                                         std::to_string(r.packages.size()) + " Packages\n");
        sources += "deb [trusted=yes] file:" + base.string() + " ./\n";
      } else {
        const std::string path = r.component + "/binary-amd64/Packages";
        write_file(base / "dists" / r.dir / path, r.packages);
        write_file(base / "dists" / r.dir / "Release", r.release + "SHA256:\n " +
                                                             gpuenv::sha256_hex(r.packages) + " " +
                                                             std::to_string(r.packages.size()) + " " + path + "\n");
        sources += "deb [trusted=yes arch=amd64] file:" + base.string() + " " + r.dir + " " + r.component + "\n";
      }
    }
    write_file(root / "sources.list", sources);
    // The options go in a file named by APT_CONFIG so that the host's apt.conf.d is not read at all.
    const std::string r = root.string();
    write_file(root / "apt.conf", "Dir \"" + r + "/\";\n" +
                                      "Dir::Etc::Parts \"" + r + "/etc/apt/apt.conf.d/\";\n" +
                                      "Dir::Etc::SourceList \"" + r + "/sources.list\";\n" +
                                      "Dir::Etc::SourceParts \"" + r + "/etc/apt/sources.list.d/\";\n" +
                                      "Dir::Etc::Preferences \"" + r + "/etc/apt/preferences\";\n" +
                                      "Dir::Etc::PreferencesParts \"" + r + "/etc/apt/preferences.d/\";\n" +
                                      "Dir::State::status \"" + r + "/var/lib/dpkg/status\";\n" +
                                      "APT::Architecture \"amd64\";\nAPT::Architectures { \"amd64\"; };\n" +
                                      "Debug::NoLocking \"true\";\nAcquire::Languages \"none\";\n");
    const std::string env = "APT_CONFIG='" + r + "/apt.conf' LC_ALL=C ";
    const auto update = run(env + "apt-get -q update");
    EXPECT_EQ(update.first, 0) << sc.name << ": " << update.second;
    EXPECT_EQ(update.second.find("\nE:"), std::string::npos) << sc.name << ": " << update.second;
    std::string command = env + "apt-cache policy";
    for (const std::string& p : sc.packages) command += " " + p;
    const auto policy = run(command);
    EXPECT_EQ(policy.first, 0) << sc.name << ": " << policy.second;
    EXPECT_EQ(policy.second.find("\nE:"), std::string::npos) << sc.name << ": " << policy.second;
    return parse_policy(policy.second);
  }

  // gpuenv's answers for the same repositories and preferences, with RepositoryRef filled as pin_apt fills it.
  std::map<std::string, AptAnswer> ask_gpuenv(const OracleScenario& sc) {
    PackageIndex index;
    auto p = parse_apt_preferences(sc.preferences, "preferences");
    EXPECT_TRUE(p.ok()) << sc.name << ": " << (p.ok() ? "" : p.error().to_string());
    if (p.ok()) index.set_preferences(std::move(*p), "amd64");
    for (const OracleRepo& r : sc.repos) {
      auto rel = parse_release(r.release + "SHA256:\n " + std::string(64, '0') + " 0 Packages\n", r.dir + "/Release");
      EXPECT_TRUE(rel.ok()) << (rel.ok() ? "" : rel.error().to_string());
      if (!rel.ok()) continue;
      const std::string uri = "file:" + (m_dir / sc.name / "repo" / r.dir).string() + "/";
      RepositoryRef ref{uri, r.component.empty() ? "./" : r.dir, r.component, r.dir};
      ref.archive = rel->suite;
      ref.codename = rel->codename;
      ref.version = rel->version;
      ref.origin = rel->origin;
      ref.label = rel->label;
      ref.architecture = r.component.empty() ? "" : "amd64";
      ref.not_automatic = rel->not_automatic;
      ref.but_automatic_upgrades = rel->but_automatic_upgrades;
      auto st = index.add(r.packages, std::move(ref), {"amd64", "all"});
      EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().to_string());
    }
    std::map<std::string, AptAnswer> out;
    for (const std::string& name : sc.packages) {
      AptAnswer& a = out[name];
      if (const BinaryPackage* c = index.candidate(name)) a.candidate = c->version.str();
      for (const BinaryPackage* v : index.versions(name))
        a.versions.insert(v->version.str() + " " + std::to_string(index.priority(*v)));
    }
    return out;
  }

  fs::path m_dir;
};

TEST_F(AptOracle, CandidatesAndPrioritiesMatchAptCachePolicy) {
  for (const OracleScenario& sc : oracle_scenarios()) {
    const auto apt = ask_apt(sc);
    const auto ours = ask_gpuenv(sc);
    for (const std::string& name : sc.packages) {
      const auto it = apt.find(name);
      ASSERT_NE(it, apt.end()) << sc.name << ": apt-cache policy said nothing about " << name;
      const AptAnswer& want = it->second;
      const AptAnswer& got = ours.at(name);
      EXPECT_EQ(got.candidate, want.candidate) << sc.name << ": candidate of " << name;
      EXPECT_EQ(got.versions, want.versions) << sc.name << ": priorities of " << name;
    }
  }
}

}  // namespace
