#!/usr/bin/env python3
"""recipes/kubevirt/: the VirtualMachine manifest against KubeVirt's kubevirt.io/v1 API.

Every mapping's fields must be ones its KubeVirt type has, every required field must be there, and what the manifest
promises must hold: each disk names a volume that exists (and each volume is a disk), each interface a network; the
root disk is a containerDisk on KubeVirt's default bus (virtio); UEFI without Secure Boot. A manifest with a misspelt
field, a disk without its volume or a bus KubeVirt does not have fails, which shows the check can fail.

The field lists are facts from KubeVirt's api/openapi-spec/swagger.json at commit
f4d05d878fed9b198186f68673357cd8ad3b8706 (2025-07-02), the definitions named in each entry; only the types this
manifest reaches are listed (a type not listed here is refused, so a manifest that grows must grow this too).
Usage: kubevirt_check.py SOURCE_DIR
"""
import copy
import os
import sys

import yaml

SOURCE = os.path.abspath(sys.argv[1])
MANIFEST = os.path.join(SOURCE, "recipes/kubevirt/gpu-node-vm.yaml")

# type: (fields -> type of the value, required fields). "[T]" is a list of T; None a scalar or a free-form map.
TYPES = {
    "v1.VirtualMachine": ({"apiVersion": None, "kind": None, "metadata": "ObjectMeta", "spec": "v1.VirtualMachineSpec", "status": None}, ["spec"]),
    "v1.VirtualMachineSpec": ({"dataVolumeTemplates": None, "instancetype": None, "preference": None, "runStrategy": None, "running": None,
                               "template": "v1.VirtualMachineInstanceTemplateSpec", "updateVolumesStrategy": None}, ["template"]),
    "v1.VirtualMachineInstanceTemplateSpec": ({"metadata": "ObjectMeta", "spec": "v1.VirtualMachineInstanceSpec"}, []),
    "v1.VirtualMachineInstanceSpec": ({k: None for k in (
        "accessCredentials", "affinity", "architecture", "dnsConfig", "dnsPolicy", "evictionStrategy", "hostname", "livenessProbe", "nodeSelector",
        "priorityClassName", "readinessProbe", "resourceClaims", "schedulerName", "startStrategy", "subdomain", "terminationGracePeriodSeconds",
        "tolerations", "topologySpreadConstraints")} | {"domain": "v1.DomainSpec", "networks": "[v1.Network]", "volumes": "[v1.Volume]"}, ["domain"]),
    "v1.DomainSpec": ({k: None for k in ("chassis", "clock", "features", "ioThreads", "ioThreadsPolicy", "launchSecurity", "machine", "memory")}
                      | {"cpu": "v1.CPU", "devices": "v1.Devices", "firmware": "v1.Firmware", "resources": "v1.ResourceRequirements"}, ["devices"]),
    "v1.Firmware": ({"acpi": None, "bootloader": "v1.Bootloader", "kernelBoot": None, "serial": None, "uuid": None}, []),
    "v1.Bootloader": ({"bios": None, "efi": "v1.EFI"}, []),
    "v1.EFI": ({"persistent": None, "secureBoot": None}, []),
    "v1.CPU": ({k: None for k in ("cores", "dedicatedCpuPlacement", "features", "isolateEmulatorThread", "maxSockets", "model", "numa", "realtime",
                                  "sockets", "threads")}, []),
    "v1.ResourceRequirements": ({"limits": None, "overcommitGuestOverhead": None, "requests": None}, []),
    "v1.Devices": ({k: None for k in (
        "autoattachGraphicsDevice", "autoattachInputDevice", "autoattachMemBalloon", "autoattachPodInterface", "autoattachSerialConsole",
        "autoattachVSOCK", "blockMultiQueue", "clientPassthrough", "disableHotplug", "downwardMetrics", "filesystems", "hostDevices", "inputs",
        "logSerialConsole", "networkInterfaceMultiqueue", "panicDevices", "rng", "sound", "tpm", "useVirtioTransitional", "video", "watchdog")}
                   | {"disks": "[v1.Disk]", "gpus": "[v1.GPU]", "interfaces": "[v1.Interface]"}, []),
    "v1.Disk": ({k: None for k in ("blockSize", "bootOrder", "cache", "cdrom", "dedicatedIOThread", "errorPolicy", "io", "lun", "name", "serial",
                                   "shareable", "tag")} | {"disk": "v1.DiskTarget"}, ["name"]),
    "v1.DiskTarget": ({"bus": None, "pciAddress": None, "readonly": None}, []),
    "v1.GPU": ({k: None for k in ("claimName", "deviceName", "name", "requestName", "tag", "virtualGPUOptions")}, ["name"]),
    "v1.Interface": ({k: None for k in ("acpiIndex", "binding", "bootOrder", "bridge", "dhcpOptions", "macAddress", "macvtap", "model", "name", "passt",
                                        "pciAddress", "ports", "slirp", "sriov", "state", "tag")} | {"masquerade": "v1.InterfaceMasquerade"}, ["name"]),
    "v1.InterfaceMasquerade": ({}, []),
    "v1.Network": ({"multus": None, "name": None, "pod": "v1.PodNetwork"}, ["name"]),
    "v1.PodNetwork": ({"vmIPv6NetworkCIDR": None, "vmNetworkCIDR": None}, []),
    "v1.Volume": ({k: None for k in ("cloudInitConfigDrive", "configMap", "dataVolume", "downwardAPI", "downwardMetrics", "emptyDisk", "ephemeral",
                                     "hostDisk", "memoryDump", "name", "persistentVolumeClaim", "secret", "serviceAccount", "sysprep")}
                  | {"cloudInitNoCloud": "v1.CloudInitNoCloudSource", "containerDisk": "v1.ContainerDiskSource"}, ["name"]),
    "v1.ContainerDiskSource": ({"image": None, "imagePullPolicy": None, "imagePullSecret": None, "path": None}, ["image"]),
    "v1.CloudInitNoCloudSource": ({k: None for k in ("networkData", "networkDataBase64", "networkDataSecretRef", "secretRef", "userData",
                                                     "userDataBase64")}, []),
    # k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta, the fields a manifest may set.
    "ObjectMeta": ({k: None for k in ("annotations", "finalizers", "generateName", "labels", "name", "namespace", "ownerReferences")}, []),
}
BUSES = {"virtio", "sata", "scsi", "usb"}  # v1.DiskTarget.bus: "supported values: virtio, sata, scsi, usb"
RUN_STRATEGIES = {"Always", "RerunOnFailure", "Manual", "Halted", "Once"}  # KubeVirt user guide, "Run Strategies"


def structure(value, type_name, where, problems):
    if type_name.startswith("["):
        if not isinstance(value, list):
            problems.append(f"{where}: a list of {type_name[1:-1]} expected")
            return
        for i, item in enumerate(value):
            structure(item, type_name[1:-1], f"{where}[{i}]", problems)
        return
    if type_name not in TYPES:
        problems.append(f"{where}: {type_name} is a type this check does not know")
        return
    fields, required = TYPES[type_name]
    if not isinstance(value, dict):
        problems.append(f"{where}: a {type_name} mapping expected")
        return
    for key in value:
        if key not in fields:
            problems.append(f"{where}.{key}: {type_name} has no field '{key}'")
        elif fields[key]:
            structure(value[key], fields[key], f"{where}.{key}", problems)
    for key in required:
        if key not in value:
            problems.append(f"{where}: {type_name} requires '{key}'")


def check(doc):
    problems = []
    if doc.get("apiVersion") != "kubevirt.io/v1" or doc.get("kind") != "VirtualMachine":
        problems.append("not a kubevirt.io/v1 VirtualMachine")
    structure(doc, "v1.VirtualMachine", "", problems)
    if problems:
        return problems
    spec = doc["spec"]
    if spec.get("runStrategy") not in RUN_STRATEGIES:
        problems.append(f"spec.runStrategy {spec.get('runStrategy')!r} is not one of KubeVirt's")
    vmi = spec["template"]["spec"]
    devices = vmi["domain"]["devices"]
    volumes = {v["name"]: v for v in vmi.get("volumes", [])}
    disks = {d["name"]: d for d in devices.get("disks", [])}
    for name, d in disks.items():
        if name not in volumes:
            problems.append(f"disk {name} names no volume")
        bus = d.get("disk", {}).get("bus", "virtio")
        if bus not in BUSES:
            problems.append(f"disk {name}: bus {bus!r} is not one of {sorted(BUSES)}")
    for name in volumes:
        if name not in disks:
            problems.append(f"volume {name} is no disk")
    networks = {n["name"] for n in vmi.get("networks", [])}
    for i in devices.get("interfaces", []):
        if i["name"] not in networks:
            problems.append(f"interface {i['name']} names no network")
    root = disks.get("root")
    if not root or "containerDisk" not in volumes.get("root", {}):
        problems.append("no root disk from a containerDisk")
    elif root.get("disk", {}).get("bus", "virtio") != "virtio":
        problems.append("the root disk is not on KubeVirt's default bus, virtio")
    efi = vmi["domain"].get("firmware", {}).get("bootloader", {}).get("efi")
    if efi is None or efi.get("secureBoot", True) is not False:
        problems.append("not UEFI with secureBoot: false (KubeVirt's EFI defaults to Secure Boot, which refuses the unsigned boot loader)")
    user_data = volumes.get("cloudinit", {}).get("cloudInitNoCloud", {}).get("userData", "")
    if not user_data.startswith("#cloud-config\n"):
        problems.append("the NoCloud user data is not #cloud-config")
    return problems


with open(MANIFEST) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
failures = []
if len(docs) != 1:
    failures.append(f"{MANIFEST}: {len(docs)} documents, one expected")
else:
    failures += [f"{MANIFEST}: {p}" for p in check(docs[0])]
    # The check can fail: a misspelt field, a disk without its volume, a bus KubeVirt does not have, Secure Boot on.
    def broken(change):
        d = copy.deepcopy(docs[0])
        change(d)
        return check(d)
    cases = {
        "misspelt field": lambda d: d["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0].__setitem__("buss", "virtio"),
        "disk without volume": lambda d: d["spec"]["template"]["spec"]["volumes"].pop(0),
        "unknown bus": lambda d: d["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["disk"].__setitem__("bus", "nvme"),
        "secure boot": lambda d: d["spec"]["template"]["spec"]["domain"]["firmware"]["bootloader"]["efi"].__setitem__("secureBoot", True),
    }
    for name, change in cases.items():
        if not broken(change):
            failures.append(f"a manifest with a {name} passed the check")
for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"kubevirt: {MANIFEST} holds to kubevirt.io/v1 ({len(TYPES)} types checked) and boots the containerDisk on virtio")
