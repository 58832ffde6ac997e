#!/usr/bin/env bash
# The unit and contract test executables of an arm64 build (scripts/build_arm64.sh BUILD_DIR all) run under
# qemu-user on this amd64 machine (docs/arm64.md). binfmt_misc need not be registered: each executable is started
# through qemu-aarch64-static, with the arm64 loader and libraries from / (multiarch); programs the tests start
# themselves are the host's (gpg, cpio, python3, ...), except gpuenv, which the arm64 build's tests start through
# qemu too (tests/CMakeLists.txt, GPUENV_BINARY).
# What cannot run under qemu-user is left out by the filters below, each with its reason; nothing else is skipped.
# Usage: tests/arm64/unit_suite.sh [--native] [BUILD_DIR]
#   BUILD_DIR  default build-arm64
#   --native   runs BUILD_DIR's executables directly, with the same filters: an amd64 build's, to compare times
# Exit 0 all passed, 1 a test failed, 77 skipped (no arm64 build, no qemu-user), saying why.
set -uo pipefail
native=0
if [ "${1:-}" = "--native" ]; then native=1; shift; fi
dir=${1:-build-arm64}
if [ ! -d "$dir/tests" ]; then echo "arm64 unit suite skipped: $dir/tests does not exist (scripts/build_arm64.sh $dir all)"; exit 77; fi
dir=$(cd "$dir" && pwd)
runner=()
if [ "$native" = 0 ]; then
  qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
  if [ -z "$qemu" ]; then echo "arm64 unit suite skipped: qemu-user is missing (scripts/deps.sh installs qemu-user-static)"; exit 77; fi
  if ! file -L "$dir/tests/base_tests" 2>/dev/null | grep -q 'ARM aarch64'; then
    echo "arm64 unit suite skipped: $dir/tests/base_tests is not an arm64 test executable (scripts/build_arm64.sh $dir all makes them)"
    exit 77
  fi
  runner=("$qemu" -L /)
fi

# Left out, each for a reason of the emulator, not of gpuenv (every other test of these executables runs):
#  openat2(2): QEMU 7.2's qemu-user (Debian 12's) answers ENOSYS, and gpuenv refuses, as it must, to unpack, link or
#    write beneath a root without it (archive.kernel, wheel.kernel, ldcache.io: "the kernel lacks openat2"). Every
#    test below fails the same way in an amd64 build run natively with openat2 denied by a seccomp filter, and no
#    other test does. A suite whose every test needs it is left out whole (WheelInstall: 27 of its 28 tests install
#    a wheel; RefusesBadFilename, the one that does not, goes with them).
#  VmBoot: builds a VM disk's root (openat2, as VmRoot) before booting it under qemu-system.
openat2_base='DebExtract.*:SafeExtract.BenignArchiveComesOutWhole:SafeExtract.FollowsSymlinksThatStayInside:SafeExtract.PathFilterSkipsDocs:'\
'SafeExtract.WritingBeneathTheRootNeverFollowsALinkOut:SafeExtract.RefusesWritingThroughAnAbsoluteSymlink:'\
'SafeExtract.RefusesWritingThroughARelativeSymlinkThatLeaves:SafeExtract.RefusesADirectoryEntryOverAnEscapingSymlink:'\
'SafeExtract.RefusesHardLinksOutOfTheTree:SafeExtract.RefusesDeviceNodes:SafeExtract.ZipIsCheckedTheSameWay'
openat2_app='AppRegistry.*'
openat2_cli='CliBuild.*:CliPush.*:CliCuda.WithoutACudaRepositoryNvidiasWheelsBringCudaAndCudnn:'\
'CliCuda.NvidiasAptRepositoryWinsWhenConfiguredAtTheReleasesOwnVersions:CliMark.ALayoutIsMarkedVerifiedAndListedAndStillRunsAsOneImage:'\
'CliMark.AnArchiveTakesMarksInsideItAndStaysAnImageSkopeoReads:CliMark.MarkRefusesAFailedReportAnotherImagesReportAndAReplayReportWithoutBeingAsked:'\
'CliMark.ValidateMarkRefusesTheReplayBackendAndAFailedRun:CliMark.InTheRegistryTwoGpuModelsAccumulateAndVerifyPicksTheOneForThisHost:'\
'CliMark.EachKindOfBadRecordIsNamedWithItsOwnReason:CliMark.ARecordsOwnTextCannotWriteEscapesOrForgeALine:CliMark.ARecordIsValidForTenYearsAtMost:'\
'CliMark.TwoMarksOfOneImageAtOnceBothLandAndTheRecordsSurviveGarbageCollection:CliMark.TheStoredEnvelopeVerifiesWithOpensslAndSecuresystemslib:'\
'CliMark.BuildPushValidateMarkRunsTheWholeMissionAndRefusesToMarkRecordedAnswers:'\
'CliMark.WithReferrersTheRecordIsAlsoASigstoreBundleReferrerFoundThroughTheFallbackIndex:'\
'CliMark.VerifyTakesKeysBeforeTheImageAndNamesAnImageThatIsNotThere:CliRunRegistry.AnImageInARegistryValidatesAndRunsFromAnEmptyCacheByTagAndByDigest:'\
'CliRunRegistry.APulledImageIsUntrustedInputRefusedInBoundedTimeWithNothingHalfWrittenLeft:VmBuild.ALockWithoutAKernelIsRefusedAndLeavesNothing'
openat2_packages_contract='WheelInstall.*'
openat2_images_contract='DebRootfs.DpkgQueryReadsTheDatabase:DebRootfs.MinimalImagesLeaveDocsOutButKeepCopyright:DebRootfs.BasePasswdEffects:'\
'DebRootfs.BasePasswdNeitherReadsNorWritesThroughLinksOutOfTheTree:DebRootfs.DatabaseIsDeterministic:'\
'DebRootfs.ADpkgDirectoryThatLeadsOutOfTheRootIsNeverWrittenThrough:DriverAlternatives.*:DriverBuild.*:DriverCache.*:'\
'LdCacheTest.AgreesWithLdconfigOnATreeOfAwkwardCases:LdCacheTest.AgreesWithLdconfigOnThisMachinesRoot:LdCacheTest.TheSameTreeGivesTheSameBytes:'\
'LdCacheTest.AnIncludeLoopIsAClearError:LdCacheTest.TheDynamicLinkerFindsAConfiguredDirectoryThroughTheCache:LoaderModelTest.*:'\
'PackageTrees.LinkingReplacesEarlierFilesSharesInodesAndNamesEachFile:PackageTrees.ADirectoryWhereAFileGoesIsAConflictAndALinkOutOfTheRootIsRefused:'\
'PackageTrees.ADirectoryLinkBeneathTheRootIsFollowedAsUnpackingFollowsIt:Unpack.WhiteoutsAndOpaqueDirectoriesHideWhatLowerLayersPutThere:'\
'Unpack.ImagesThatShareALayerShareItsUnpackedFiles:Unpack.AnIndexOfPlatformsIsFollowedToItsLinuxAmd64ImageAndEveryDocumentIsVerified:VmRoot.*:VmBoot.*'
declare -A filter=(
  [base_tests]="-$openat2_base"
  [resolver_tests]='*'
  [packages_tests]='*'
  [images_tests]='*'
  [validate_tests]='*'
  [marks_tests]='*'
  [attest_tests]='*'
  [app_tests]="-$openat2_app"
  [cli_tests]="-$openat2_cli"
  [contract_tests]='*'
  [packages_contract_tests]="-$openat2_packages_contract"
  [images_contract_tests]="-$openat2_images_contract"
)
order=(base_tests resolver_tests packages_tests images_tests validate_tests marks_tests attest_tests app_tests cli_tests
       contract_tests packages_contract_tests images_contract_tests)

failed=0
total_passed=0 total_failed=0 total_skipped=0 total_left_out=0
suite_t0=$(date +%s%N)
printf '%-26s %7s %7s %7s %8s %9s\n' executable passed failed skipped left-out seconds
for t in "${order[@]}"; do
  exe=$dir/tests/$t
  if [ ! -x "$exe" ]; then echo "$t: missing ($exe)"; failed=1; continue; fi
  log=$dir/tests/$t.arm64-suite.log
  [ "$native" = 1 ] && log=$dir/tests/$t.native-suite.log
  all=$(cd "$dir/tests" && "${runner[@]}" "$exe" --gtest_list_tests | grep -c '^  ')
  t0=$(date +%s%N)
  (cd "$dir/tests" && "${runner[@]}" "$exe" --gtest_filter="${filter[$t]}" >"$log" 2>&1)
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000 ))
  passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1/p' "$log" | tail -1)
  nfailed=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?, listed below.*/\1/p' "$log" | tail -1)
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?, listed below.*/\1/p' "$log" | tail -1)
  ran=$(sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran\..*/\1/p' "$log" | tail -1)
  left_out=$(( all - ${ran:-0} ))
  printf '%-26s %7s %7s %7s %8s %9.1f\n' "$t" "${passed:-0}" "${nfailed:-0}" "${skipped:-0}" "$left_out" "${secs}e-3"
  total_passed=$((total_passed + ${passed:-0})) total_failed=$((total_failed + ${nfailed:-0}))
  total_skipped=$((total_skipped + ${skipped:-0})) total_left_out=$((total_left_out + left_out))
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -E '^\[  FAILED  \] [A-Za-z][^ ]*$' "$log" | sed 's/^/    /'
    [ -n "$nfailed" ] || { total_failed=$((total_failed + 1)); tail -5 "$log" | sed 's/^/    /'; }
  fi
done
printf '%-26s %7s %7s %7s %8s %9.1f\n' total "$total_passed" "$total_failed" "$total_skipped" "$total_left_out" \
  "$(( ($(date +%s%N) - suite_t0) / 1000000 ))e-3"
echo "logs: $dir/tests/*.$([ "$native" = 1 ] && echo native || echo arm64)-suite.log"
echo "$([ "$native" = 1 ] && echo native || echo arm64): $total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$failed"
