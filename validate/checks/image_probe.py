
# gpuenv image probe (gpuenv-image-probe-v1): run by `gpuenv validate --image` inside the image with the image's
# own python3. Prints exactly one JSON object on stdout and never raises: every step is guarded and its error is
# reported as a string. The CUDA libraries and each framework are probed in forked children, so a crash, a hang
# or two frameworks' conflicting libraries cannot take the whole report with them.
import json
import os
import sys

SCHEMA = "gpuenv-image-probe-v1"


def err_text(e):
    text = " ".join(str(e).split())
    if len(text) > 600:
        text = text[:600] + "..."
    return type(e).__name__ + (": " + text if text else "")


def decode_cudnn(v):
    # cuDNN 8: major*1000 + minor*100 + patch; cuDNN 9 and later: major*10000 + minor*100 + patch.
    v = int(v)
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def decode_cuda(v):
    v = int(v)
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def majors(version, fallbacks):
    out = []
    if version:
        out.append(str(version).split(".")[0])
    for m in fallbacks:
        if m not in out:
            out.append(m)
    return out


def search_dirs():
    import glob
    dirs = []
    roots = []
    try:
        import site
        roots.extend(site.getsitepackages())
        roots.append(site.getusersitepackages())
    except Exception:
        pass
    roots.extend(p for p in sys.path if p)
    for root in roots:
        for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib"))) + [os.path.join(root, "torch", "lib")]:
            if os.path.isdir(d) and d not in dirs:
                dirs.append(d)
    for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
              "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"):
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def loaded_path(name):
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[-1]).startswith(name):
                    return parts[-1]
    except Exception:
        pass
    return None


def load(stem, major_list, dirs):
    import ctypes
    names = ["%s.so.%s" % (stem, m) for m in major_list] + [stem + ".so"]
    candidates = list(names)
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.exists(p):
                candidates.append(p)
    errors = []
    for c in candidates:
        try:
            lib = ctypes.CDLL(c)
            return lib, loaded_path(stem + ".so") or c, None
        except Exception as e:
            errors.append(err_text(e))
    return None, None, "; ".join(errors[:4]) if errors else "not found"


def probe_libraries(args, report):
    import ctypes
    cuda_majors = majors(args.get("cuda"), ["12", "13", "11"])
    dirs = search_dirs()
    entry = {"loaded": False, "path": None, "error": None}
    report("driver")
    lib, path, error = load("libcuda", ["1"], [])
    driver = dict(entry, path=path, error=error, loaded=lib is not None)
    if lib is not None:
        try:
            v = ctypes.c_int(0)
            rc = lib.cuDriverGetVersion(ctypes.byref(v))
            if rc == 0:
                driver["version"] = v.value
                driver["version_text"] = decode_cuda(v.value)
            else:
                driver["error"] = "cuDriverGetVersion returned %d" % rc
        except Exception as e:
            driver["error"] = err_text(e)

    report("cudart")
    lib, path, error = load("libcudart", cuda_majors, dirs)
    cudart = dict(entry, path=path, error=error, loaded=lib is not None)
    if lib is not None:
        try:
            v = ctypes.c_int(0)
            rc = lib.cudaRuntimeGetVersion(ctypes.byref(v))
            if rc == 0:
                cudart["version"] = v.value
                cudart["version_text"] = decode_cuda(v.value)
            else:
                cudart["error"] = "cudaRuntimeGetVersion returned %d" % rc
        except Exception as e:
            cudart["error"] = err_text(e)
        report("cudart_devices")
        try:
            n = ctypes.c_int(0)
            rc = lib.cudaGetDeviceCount(ctypes.byref(n))
            cudart["device_count"] = n.value if rc == 0 else 0
            if rc != 0:
                name = lib.cudaGetErrorName
                name.restype = ctypes.c_char_p
                text = lib.cudaGetErrorString
                text.restype = ctypes.c_char_p
                cudart["device_error_code"] = rc
                cudart["device_error"] = "cudaGetDeviceCount returned %d (%s: %s)" % (
                    rc, (name(rc) or b"?").decode(), (text(rc) or b"?").decode())
        except Exception as e:
            cudart["device_error"] = err_text(e)

    report("cublas")
    lib, path, error = load("libcublas", cuda_majors, dirs)
    cublas = dict(entry, path=path, error=error, loaded=lib is not None)
    if lib is not None:
        try:
            parts = []
            for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                v = ctypes.c_int(0)
                rc = lib.cublasGetProperty(prop, ctypes.byref(v))
                if rc != 0:
                    raise RuntimeError("cublasGetProperty(%d) returned %d" % (prop, rc))
                parts.append(v.value)
            cublas["version_text"] = "%d.%d.%d" % tuple(parts)
        except Exception as e:
            cublas["error"] = err_text(e)

    report("cudnn")
    lib, path, error = load("libcudnn", majors(args.get("cudnn"), ["9", "8"]), dirs)
    cudnn = dict(entry, path=path, error=error, loaded=lib is not None)
    if lib is not None:
        try:
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            v = lib.cudnnGetVersion()
            cudnn["version"] = int(v)
            cudnn["version_text"] = decode_cudnn(v)
        except Exception as e:
            cudnn["error"] = err_text(e)
    return {"driver": driver, "cudart": cudart, "cublas": cublas, "cudnn": cudnn}


# The framework smoke tests: 256x256 float32 matmul and a 3x3 convolution on the GPU against the CPU, with TF32
# off so that both sides compute in full float32.
N = 256


def compare(got, ref):
    import math
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return {"error": "the GPU result has shape %s, the CPU result %s" % (got.shape, ref.shape)}
    err, top = float(np.max(np.abs(got - ref))), float(np.max(np.abs(ref)))
    if not (math.isfinite(err) and math.isfinite(top)):
        return {"error": "the result contains NaN or infinity"}
    return {"max_abs_err": err, "max_abs_ref": top, "error": None}


def finite(value):
    # JSON has no NaN or infinity: report them as null.
    import math
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def step(r, key, fn):
    try:
        r[key] = fn()
    except BaseException as e:
        r[key] = {"error": err_text(e)}


def probe_torch(r, report):
    report("import")
    import torch
    import torch.nn.functional as F
    r["imported"] = True
    r["version"] = str(torch.__version__)
    report("versions")
    try:
        r["cuda"] = torch.version.cuda
        v = torch.backends.cudnn.version()
        r["cudnn"] = decode_cudnn(v) if v else None
    except BaseException as e:
        r["version_error"] = err_text(e)
    report("gpu")
    r["gpu_visible"] = bool(torch.cuda.is_available())
    r["device_count"] = int(torch.cuda.device_count())
    if not r["gpu_visible"] or r["device_count"] == 0:
        r["gpu_visible"] = False
        try:
            torch.cuda.init()
        except BaseException as e:
            r["gpu_error"] = err_text(e)
        return
    r["device_name"] = torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator().manual_seed(1234)
    a = torch.rand(N, N, generator=g) * 2 - 1
    b = torch.rand(N, N, generator=g) * 2 - 1

    def matmul():
        ref = a @ b
        got = (a.cuda() @ b.cuda()).cpu()
        torch.cuda.synchronize()
        return compare(got.numpy(), ref.numpy())

    report("matmul")
    step(r, "matmul", matmul)
    x = torch.rand(4, 8, 32, 32, generator=g) * 2 - 1
    w = torch.rand(16, 8, 3, 3, generator=g) * 2 - 1

    def conv():
        torch.backends.cudnn.enabled = True
        ref = F.conv2d(x, w, padding=1)
        got = F.conv2d(x.cuda(), w.cuda(), padding=1).cpu()
        torch.cuda.synchronize()
        out = compare(got.numpy(), ref.numpy())
        out["cudnn_enabled"] = bool(torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled)
        return out

    report("conv")
    step(r, "conv", conv)


def probe_tensorflow(r, report):
    report("import")
    import tensorflow as tf
    import numpy as np
    r["imported"] = True
    r["version"] = str(tf.__version__)
    report("versions")
    try:
        info = tf.sysconfig.get_build_info()
        r["cuda"] = info.get("cuda_version")
        r["cudnn"] = info.get("cudnn_version")
    except BaseException as e:
        r["version_error"] = err_text(e)
    report("gpu")
    gpus = tf.config.list_physical_devices("GPU")
    r["device_count"] = len(gpus)
    r["gpu_visible"] = len(gpus) > 0
    if not gpus:
        return
    for d in gpus:
        try:
            tf.config.experimental.set_memory_growth(d, True)
        except BaseException:
            pass
    try:
        tf.config.experimental.enable_tensor_float_32_execution(False)
    except BaseException:
        pass
    try:
        r["device_name"] = tf.config.experimental.get_device_details(gpus[0]).get("device_name")
    except BaseException:
        pass
    rng = np.random.RandomState(1234)
    a = rng.uniform(-1, 1, (N, N)).astype(np.float32)
    b = rng.uniform(-1, 1, (N, N)).astype(np.float32)

    def matmul():
        with tf.device("/CPU:0"):
            ref = tf.matmul(a, b).numpy()
        with tf.device("/GPU:0"):
            got = tf.matmul(a, b).numpy()
        return compare(got, ref)

    report("matmul")
    step(r, "matmul", matmul)
    x = rng.uniform(-1, 1, (4, 32, 32, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 8, 16)).astype(np.float32)

    def conv():
        with tf.device("/CPU:0"):
            ref = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        with tf.device("/GPU:0"):
            got = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        out = compare(got, ref)
        out["cudnn_enabled"] = bool(tf.test.is_built_with_cuda())
        return out

    report("conv")
    step(r, "conv", conv)


def probe_jax(r, report):
    report("import")
    import jax
    import numpy as np
    r["imported"] = True
    r["version"] = str(jax.__version__)
    report("versions")
    try:
        from jax._src.lib import cuda_versions
        if cuda_versions is not None:
            r["cuda"] = decode_cuda(cuda_versions.cuda_runtime_get_version())
            r["cudnn"] = decode_cudnn(cuda_versions.cudnn_get_version())
    except BaseException as e:
        r["version_error"] = err_text(e)
    report("gpu")
    try:
        gpus = jax.devices("gpu")
    except BaseException as e:
        gpus = []
        r["gpu_error"] = err_text(e)
    r["device_count"] = len(gpus)
    r["gpu_visible"] = len(gpus) > 0
    if not gpus:
        return
    r["device_name"] = getattr(gpus[0], "device_kind", None)
    cpu = jax.devices("cpu")[0]
    hi = jax.lax.Precision.HIGHEST
    rng = np.random.RandomState(1234)
    a = rng.uniform(-1, 1, (N, N)).astype(np.float32)
    b = rng.uniform(-1, 1, (N, N)).astype(np.float32)

    def matmul():
        mm = lambda p, q: jax.numpy.matmul(p, q, precision=hi)
        ref = np.asarray(mm(jax.device_put(a, cpu), jax.device_put(b, cpu)))
        got = np.asarray(mm(jax.device_put(a, gpus[0]), jax.device_put(b, gpus[0])))
        return compare(got, ref)

    report("matmul")
    step(r, "matmul", matmul)
    x = rng.uniform(-1, 1, (4, 8, 32, 32)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 8, 3, 3)).astype(np.float32)

    def conv():
        cv = lambda p, q: jax.lax.conv_general_dilated(p, q, (1, 1), "SAME", precision=hi)
        ref = np.asarray(cv(jax.device_put(x, cpu), jax.device_put(w, cpu)))
        got = np.asarray(cv(jax.device_put(x, gpus[0]), jax.device_put(w, gpus[0])))
        out = compare(got, ref)
        out["cudnn_enabled"] = True
        return out

    report("conv")
    step(r, "conv", conv)


def probe_serving(r, report):
    """vLLM and SGLang compute through the torch they pin (probed on its own): their import and version only."""
    report("import")
    import importlib
    mod = importlib.import_module(r["module"])
    r["imported"] = True
    r["version"] = str(getattr(mod, "__version__", ""))
    r["import_only"] = True


FRAMEWORKS = {"torch": probe_torch, "pytorch": probe_torch, "tensorflow": probe_tensorflow, "jax": probe_jax,
              "vllm": probe_serving, "sglang": probe_serving}


def in_child(work, deadline):
    """Runs work(report) in a forked child; returns (result or None, error or None, timed_out)."""
    import select
    import signal
    import time
    try:
        rfd, wfd = os.pipe()
        pid = os.fork()
    except BaseException as e:
        # No fork: run here, unguarded against crashes but still against exceptions.
        try:
            return work(lambda s: None), None, False
        except BaseException as e2:
            return None, err_text(e2) + " (and fork failed: " + err_text(e) + ")", False
    if pid == 0:
        code = 0
        try:
            os.close(rfd)
            out = os.fdopen(wfd, "w")

            def report(s):
                out.write("step " + s + "\n")
                out.flush()

            try:
                result = work(report)
                out.write("result " + json.dumps(finite(result)) + "\n")
            except BaseException as e:
                out.write("error " + json.dumps(err_text(e)) + "\n")
            out.flush()
        except BaseException:
            code = 3
        os._exit(code)
    os.close(wfd)
    data = b""
    timed_out = False
    while True:
        left = deadline - time.time()
        if left <= 0:
            timed_out = True
            break
        try:
            ready, _, _ = select.select([rfd], [], [], left)
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(rfd)
    if timed_out:
        try:
            os.kill(pid, signal.SIGKILL)
        except BaseException:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        status = 0
    last_step, result, error = "start", None, None
    for line in data.decode("utf-8", "replace").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "step":
            last_step = rest
        elif kind == "result":
            result = json.loads(rest)
        elif kind == "error":
            error = json.loads(rest) + " (during " + last_step + ")"
    if timed_out:
        return result, "timed out during " + last_step, True
    if result is None and error is None:
        if os.WIFSIGNALED(status):
            error = "the probe process died with signal %d during %s" % (os.WTERMSIG(status), last_step)
        else:
            error = "the probe process exited with status %d during %s" % (os.waitstatus_to_exitcode(status)
                                                                             if hasattr(os, "waitstatus_to_exitcode")
                                                                             else status, last_step)
    return result, error, False


def probe_framework(name, deadline):
    module = "torch" if name == "pytorch" else name
    base = {"module": module, "imported": False, "error": None, "timed_out": False}
    fn = FRAMEWORKS.get(name)
    if fn is None:
        base["error"] = "gpuenv's probe does not know the framework '%s'" % name
        return base

    def work(report):
        r = dict(base)
        try:
            fn(r, report)
        except BaseException as e:
            r["error"] = err_text(e)
        return r

    result, error, timed_out = in_child(work, deadline)
    out = result if isinstance(result, dict) else dict(base)
    if error:
        out["error"] = error
    out["timed_out"] = timed_out
    return out


def main():
    import time
    result = {"schema": SCHEMA, "python": sys.version.split()[0], "error": None, "devices": [], "libraries": {},
              "frameworks": {}}
    args = {}
    try:
        args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
        if not isinstance(args, dict):
            raise ValueError("the argument is not a JSON object")
    except BaseException as e:
        args = {}
        result["error"] = "bad probe arguments: " + err_text(e)
    deadline = time.time() + float(args.get("timeout_s") or 60)
    try:
        if args.get("visible_devices"):
            os.environ["CUDA_VISIBLE_DEVICES"] = str(args["visible_devices"])
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import glob
        result["devices"] = sorted(glob.glob("/dev/nvidia*"))
    except BaseException as e:
        result["error"] = err_text(e)
    try:
        libs, error, timed_out = in_child(lambda report: probe_libraries(args, report), deadline)
        result["libraries"] = libs if isinstance(libs, dict) else {}
        result["libraries"]["error"] = error
        result["libraries"]["timed_out"] = timed_out
    except BaseException as e:
        result["libraries"] = {"error": err_text(e), "timed_out": False}
    for name in args.get("frameworks") or []:
        try:
            result["frameworks"][str(name)] = probe_framework(str(name), deadline)
        except BaseException as e:
            result["frameworks"][str(name)] = {"imported": False, "error": err_text(e), "timed_out": False}
    return result


def run():
    # Frameworks print to stdout; keep the real stdout for the JSON only and send everything else to stderr.
    out = sys.stdout
    try:
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    except BaseException:
        pass
    try:
        result = main()
    except BaseException as e:
        result = {"schema": SCHEMA, "error": "the probe failed: " + err_text(e)}
    try:
        text = json.dumps(finite(result), sort_keys=True, allow_nan=False)
    except BaseException as e:
        text = json.dumps({"schema": SCHEMA, "error": "the probe's result is not JSON: " + err_text(e)})
    out.write(text + "\n")
    out.flush()
    os._exit(0)


run()
