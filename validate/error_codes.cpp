#include "validate/error_codes.hpp"

namespace gpuenv::validate {

const std::vector<ErrorCode>& error_codes() {
  // Append-only. Keep the hint an instruction a node operator can follow without reading gpuenv's source.
  static const std::vector<ErrorCode> k_codes = {
      // The run itself.
      {"hang", "a check did not finish within its deadline",
       "the GPU or driver stopped answering: look for Xid errors in `dmesg`, then reset the GPU or reboot the node "
       "and rerun; if it hangs again, drain the node"},
      {"internal", "gpuenv itself failed (a bug, or an adapter broke the port's contract)",
       "rerun with the same arguments and report the message to the gpuenv maintainers"},
      {"backend_error", "the driver returned an error while gpuenv read or ran work on the GPU",
       "read the message and look for Xid errors in `dmesg`; rerun once, and drain the node if it repeats"},
      {"no_gpu", "no NVIDIA GPU was found, or none of the requested GPUs exists",
       "check `lspci | grep -i nvidia` and the --gpus list; reseat or replace the GPU if it is missing from lspci"},

      // software
      {"no_driver", "the NVIDIA kernel driver is not loaded",
       "install the NVIDIA driver or load it (`modprobe nvidia`), then check `dmesg` for load errors"},
      {"driver_too_old", "the host driver is older than the lock's minimum driver",
       "update the host driver to at least the lock's floor, or re-lock the image for this driver"},
      {"driver_cuda_too_old", "the host driver supports an older CUDA than the image uses, without forward compatibility",
       "update the host driver; or add the cuda-compat package to the image (data-center GPUs only); or lock an "
       "older CUDA"},
      {"forward_compat_used", "the image's CUDA is newer than the driver's and runs through forward compatibility",
       "works on data-center GPUs with a supported driver branch; update the host driver to drop the dependency"},
      {"driver_version_unknown", "the driver did not report a version gpuenv could read",
       "check `nvidia-smi`; reinstall the driver if it cannot report its version"},
      {"lock_invalid", "a version in the lock could not be read",
       "regenerate the lock with `gpuenv lock`; the lock file may have been edited by hand"},
      {"nouveau_loaded", "the nouveau driver is loaded and conflicts with the NVIDIA driver",
       "blacklist nouveau (`modprobe.blacklist=nouveau` or /etc/modprobe.d), rebuild the initramfs and reboot"},
      {"device_node_missing", "a /dev/nvidia* device node is missing",
       "load nvidia-uvm (`nvidia-modprobe -u -c=0`) or run `nvidia-smi` once as root to create the nodes; in a "
       "container, pass the device nodes through"},
      {"persistence_off", "persistence mode is off, so the driver re-initialises the GPU for every client",
       "enable the persistence daemon (`systemctl enable --now nvidia-persistenced`)"},
      {"fabric_manager_down", "the NVSwitch fabric manager is not running or its training failed",
       "start the fabric manager matching the driver version (`systemctl start nvidia-fabricmanager`) and check "
       "its log"},
      {"mig_mismatch", "the GPU's MIG mode differs from the spec",
       "change the MIG mode as an administrator (`nvidia-smi -i N -mig 1|0`, then reset the GPU), or fix the spec"},
      {"mig_pending", "a MIG mode change is pending and takes effect after a GPU reset",
       "reset the GPU (`nvidia-smi -r -i N`) or reboot the node"},
      {"cc_mismatch", "the confidential-computing mode differs from the lock's gpu.confidential",
       "set the mode the lock asks for with NVIDIA's gpu-admin-tools (nvidia_gpu_tools.py --set-cc-mode) while the "
       "node is out of service (it resets the GPU), or lock for this node's mode; gpuenv never changes it"},
      {"cc_devtools", "confidential computing is in dev-tools mode, which gives no confidentiality",
       "switch the GPUs to production CC mode (cc-mode on, not devtools) before running confidential work"},
      {"cc_unknown", "the lock requires confidential computing, but the driver does not report its state",
       "use a GPU that supports confidential computing and a driver at least the catalog's confidential_driver_min "
       "for it (recipes/catalog/gpus.yaml)"},
      {"cc_attestation_failed", "the GPU's attestation evidence did not pass the attestation policy",
       "run gpuenv attest for every claim and its reason; a measurement mismatch names its index: a VBIOS index asks for a GPU "
       "reset (or VM stop and start), a driver index for a host reboot; a RIM that is not found asks for --rim-dir or --rim-service"},
      {"cc_no_evidence", "the GPU gave no confidential-computing attestation evidence",
       "confidential computing must be on (nvidia-smi conf-compute -f) with a driver that has nvmlDeviceGetConfComputeGpuAttestationReport"},
      {"cc_not_ready", "confidential computing is on, but the GPUs do not accept work yet",
       "attest the GPUs and set the ready state (gpuenv attest --set-ready, or NVIDIA's verifier); then rerun"},
      {"env_debug_var", "a debugging or injection variable is set and changes how CUDA runs",
       "unset the named variables for validation and production runs"},
      {"cdi_stale", "a CDI spec for nvidia.com/gpu names a device node, library or hook that no longer exists on the host",
       "regenerate the spec the message names: `nvidia-ctk cdi generate --output=FILE` (for /var/run/cdi/nvidia.yaml "
       "with NVIDIA container toolkit 1.18.0 or later: `systemctl restart nvidia-cdi-refresh.service`), then rerun"},
      {"cdi_driver_mismatch", "a CDI spec for nvidia.com/gpu names driver libraries of another version than the loaded driver",
       "the driver was upgraded after the spec was written: regenerate it with `nvidia-ctk cdi generate --output=FILE` "
       "(or `systemctl restart nvidia-cdi-refresh.service`), and enable nvidia-cdi-refresh.path so upgrades refresh it"},
      {"cdi_mig_stale", "a CDI spec for nvidia.com/gpu names MIG devices or /dev/nvidia-caps nodes that no longer exist",
       "the MIG layout changed after the spec was written (the toolkit does not refresh on MIG changes): regenerate it "
       "with `nvidia-ctk cdi generate --output=FILE` after every MIG change"},
      {"cdi_malformed", "a CDI spec file cannot be read as a CDI spec (syntax, cdiVersion, kind, devices or a path)",
       "regenerate the file with `nvidia-ctk cdi generate --output=FILE`, or move a file that is not a spec out of the "
       "CDI directories (runtimes read every *.json and *.yaml there)"},
      {"cdi_unreadable", "a CDI spec file or directory could not be read, or not all of it could be judged",
       "run gpuenv as root to read every spec, replace what is not a regular file, and keep the spec directories to "
       "a few files"},

      // health
      {"ecc_disabled", "ECC is disabled on a GPU that supports it",
       "enable ECC as an administrator (`nvidia-smi -e 1`) and reboot, unless it was turned off on purpose"},
      {"ecc_pending", "an ECC mode change is pending and takes effect after a reboot",
       "reboot the node (or reset the GPU) to apply the pending ECC mode"},
      {"ecc_uncorrectable", "uncorrectable ECC errors occurred since the driver loaded",
       "drain the node; reset the GPU or reboot, rerun `gpuenv validate --level long`, and replace the GPU if the "
       "errors return"},
      {"ecc_uncorrectable_aggregate", "uncorrectable ECC errors occurred during the GPU's lifetime",
       "watch the count: if it grows, or row remaps or retired pages are pending, drain the node and open an RMA"},
      {"row_remap_pending", "a row remap is pending and is applied at the next GPU reset",
       "drain the node, then reset the GPU (`nvidia-smi -r`) or reboot to apply the pending remap"},
      {"row_remap_failure", "a row remap failed: the GPU has run out of spare rows in a bank",
       "drain the node and replace the GPU (RMA)"},
      {"row_remap_limit", "the GPU has remapped at least DCGM's limit of rows for uncorrectable errors",
       "drain the node and replace the GPU (RMA)"},
      {"retired_pages_pending", "a page retirement is pending and is applied at the next driver reload",
       "drain the node, then reset the GPU or reboot to retire the pending pages"},
      {"retired_pages_limit", "the GPU has retired at least DCGM's limit of memory pages",
       "drain the node and replace the GPU (RMA)"},
      {"pcie_downtrained", "the PCIe link runs below its maximum generation or width under load",
       "reseat the GPU or riser, check the slot's BIOS settings, and update the system firmware; replace the riser "
       "or GPU if it persists"},
      {"pcie_replays", "the PCIe link replays packets more often than expected",
       "reseat the GPU and its riser or cables; a rising count points at a failing link"},
      {"clock_throttled", "clocks were slowed by hardware, thermal or power-brake events under load",
       "check cooling (fans, airflow, inlet temperature) and the power supply; drain the node if it persists"},
      {"temperature_high", "the GPU runs at or near its slowdown temperature under load",
       "check fans, airflow and inlet temperature, and clean dust filters"},

      // kernels
      {"context_failed", "a CUDA context could not be created on the GPU",
       "read the message; check `dmesg` for Xid errors, reset the GPU or reboot; drain the node if it repeats"},
      {"compute_mismatch", "validation kernels computed results that differ from the host reference",
       "drain the node: the GPU computes wrong results; rerun at --level long and replace the GPU if it repeats"},
      {"memtest_error", "GPU memory read back differently from what was written",
       "drain the node; reset the GPU to apply any pending remap, rerun `gpuenv validate --level long --check "
       "memtest`, and replace the GPU if errors remain"},
      {"memtest_truncated", "the memory test stopped at its deadline before covering the requested memory",
       "rerun `gpuenv validate --level long --check memtest` on an idle GPU"},
      {"gemm_mismatch", "repeated identical GEMMs gave different results, or differed from the reference",
       "drain the node: the GPU computes inconsistently; check clocks and temperature, and replace the GPU if it "
       "repeats"},
      {"throughput_degraded", "GEMM throughput fell by more than 10% between the start and the end of a sustained load",
       "check the GPU's cooling (fans, airflow, inlet temperature) and power delivery, and compare clock_events and "
       "temperature; drain the node if it repeats"},
      {"unverified", "a measurement had too few samples or its data was not verified, so it was not trusted",
       "rerun; if it repeats, the adapter or kernels are at fault: report it to the gpuenv maintainers"},

      // throughput
      {"bandwidth_low", "a bandwidth is below the fail fraction of the known-good reference for this GPU",
       "check for other work on the GPU, clocks, the PCIe link and NUMA placement; drain the node if it stays low"},
      {"tflops_low", "GEMM throughput is below the fail fraction of the known-good reference for this GPU",
       "check for other work on the GPU, clocks, power limits and temperature; drain the node if it stays low"},
      {"node_outlier", "one GPU measures well below the mean of the same GPUs in this node",
       "compare with the node's other GPUs: check this GPU's link, clocks and cooling; reseat or replace it"},
      {"no_threshold",
       "no reference, listed or derived from the hardware, judges this figure: it is reported as MEASURED, not judged",
       "add a sourced reference (or the dense peak, NVLink link rate or PCIe rate it derives from) for this model to "
       "recipes/gpus/thresholds.yaml"},

      // image (`--image`: the probe runs inside the image with the image's python3)
      {"image_probe_failed", "the probe could not run inside the image, or printed no report",
       "read the message's stderr; check that the image starts and has python3 (`gpuenv run IMAGE -- python3 "
       "--version`) and that bubblewrap is installed on the host"},
      {"image_timeout", "the probe inside the image did not finish within its time and was killed",
       "a first import from a cold disk can be slow: rerun once; if it repeats, find the step that hangs with "
       "`gpuenv run IMAGE -- python3 -c 'import torch; print(torch.cuda.is_available())'` and look for Xid errors "
       "in `dmesg`"},
      {"image_library_load_failed", "a CUDA library of the image (libcudart, libcublas, libcudnn) does not load or "
       "does not answer",
       "check that the image holds the library the lock names (`gpuenv inspect IMAGE --all`) and that the host "
       "driver works (`nvidia-smi`); rebuild the image from its lock"},
      {"image_cuda_mismatch", "a CUDA or cuDNN version in the image (as its library or framework reports it) differs "
       "from the lock",
       "rebuild the image from its lock (`gpuenv build LOCK`); if the lock is stale, re-lock the spec and rebuild"},
      {"image_import_failed", "the image's Python cannot import a framework the lock names",
       "read the Python error: a missing module means the image lacks the framework, a missing shared library names "
       "the CUDA library it needs; rebuild the image from its lock"},
      {"image_framework_mismatch", "a framework in the image has another version than the lock",
       "rebuild the image from the lock; the image was changed after the build or built from another lock"},
      {"image_no_gpu", "the image's CUDA runtime or framework sees no GPU",
       "the host's /dev/nvidia* device nodes and driver libraries (libcuda.so.1, under /run/gpuenv/driver) must be "
       "bound into the sandbox: install bubblewrap (the chroot fallback binds no GPU), check the host driver with "
       "`nvidia-smi`, and check that the framework is a CUDA build"},
      {"image_framework_error", "the framework raised an error while running work on the GPU inside the image",
       "read the error: out of memory means other work holds the GPU; a CUDA or cuDNN error often means the image's "
       "libraries and the host driver disagree (see libraries_load)"},
      {"image_matmul_mismatch", "a matmul on the GPU through the image's framework differs from the CPU result",
       "rerun; if it repeats, run `gpuenv validate --check kernels`: a GPU that computes wrong results must be drained"},
      {"image_conv_mismatch", "a cuDNN convolution through the image's framework differs from the CPU result",
       "rerun; if it repeats while the matmul and the kernel checks pass, the image's cuDNN is at fault: rebuild the "
       "image from its lock, else drain the node"},
      // nccl_allreduce --multi-node
      {"peer_missing", "a rank of the multi-node run never reached rank 0 (the message names each missing rank and host)",
       "start gpuenv on every node of the job (srun -N<nodes> --ntasks-per-node=1), check that each node reaches rank "
       "0's rendezvous port, and that every rank runs with the same run token"},
      {"peer_lost", "a rank of the multi-node run died or stopped answering during the run (the message names it)",
       "look at the named rank's node: its gpuenv output, `dmesg` (out of memory, Xid errors) and the Slurm step's "
       "log; check the fabric with `ibstat`, then rerun"},
      {"rendezvous_failed", "the ranks of the multi-node run could not meet (a port that cannot be used, a refused "
       "hello, a peer speaking another protocol)",
       "read the message; run the same gpuenv release on every node, give each run its own --rendezvous-port or "
       "--run-token, and open the port between the nodes"},
      {"rdma_port_down", "an RDMA port of a node in the multi-node run is not active, and the node has fewer active "
       "ports than GPUs (the message names the ports)",
       "bring the named ports up: `ibstat`, the cable, the switch port, the subnet manager (`sminfo`); then rerun"},
      {"image_cudnn_unavailable", "the framework reports that cuDNN is unavailable or disabled",
       "the image lacks the cuDNN the framework was built for, or it does not load: see libraries_load, and rebuild "
       "the image from its lock"},

      // data (data_read, --data)
      {"data_read_slow", "the data path's sequential read rate is below the threshold (--data-min, validate.data_read_min)",
       "check what else reads or writes there (iostat -x 1), the device's health (smartctl, nvme smart-log) or the "
       "network file system's mount options and link; a cold network cache reads slower than a warm one"},
      {"data_read_unjudged", "the data path's read rate was measured but no threshold judges it",
       "give a threshold: --data-min 2GB/s, or validate: {data_read_min: 2GB/s} in the spec given with --spec"},
      {"data_path_unusable", "the data path (--data) does not exist, cannot be read, is empty, or is neither a "
       "directory nor a regular file",
       "give an existing directory you may write to, or a regular file you may read (its size should be 1 GiB or more)"},
      {"data_read_only", "the data directory is on a read-only file system, so gpuenv cannot write its test file there",
       "give a file on it to read instead (--data FILE): gpuenv only reads the files you name"},
      {"data_no_space", "the data directory's file system has too little free space (or quota) for the test file",
       "free space, or give a file to read instead (--data FILE); gpuenv writes at most a tenth of the free space"},
      {"data_io_error", "a read or write on the data path failed with an I/O error",
       "read the message and the kernel log (dmesg) for the device or the network file system; rerun once, and "
       "treat the storage as faulty if it repeats"},
      {"data_mismatch", "the test file gpuenv wrote read back with other bytes than it wrote",
       "the storage returned wrong data: check the kernel log (dmesg), the device's health and the file system; keep "
       "training data off it until this is understood"},
      {"data_read_no_time", "data_read had no time left before its deadline to write or read its file, so nothing "
       "was measured",
       "rerun `gpuenv validate --check data_read --data PATH` at the same level; if removing directories left by "
       "earlier runs took the time (the message lists them), the next run will not have to"},
  };
  return k_codes;
}

const ErrorCode* find_error_code(std::string_view code) {
  for (const auto& entry : error_codes()) {
    if (code == entry.code) return &entry;
  }
  return nullptr;
}

}  // namespace gpuenv::validate
