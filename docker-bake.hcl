// Generated from images/matrix.yaml by `make generate` (python -m hyperframe.images generate); do not edit.
// Build: make images (images/build.sh), or docker buildx bake [group or target].

variable "REGISTRY" {
  default = "ghcr.io/hyperframe-dev"
}

variable "WHEELHOUSE" {
  default = "images/wheelhouse"
}

variable "ROOTFS_LOCAL_DIR" {
  default = ""
}

variable "ROOTFS_LOCAL_SHA256" {
  default = ""
}

group "default" {
  targets = ["operator", "framework-cuda13", "framework-cuda12", "framework-cpu"]
}

group "base" {
  targets = ["base-cuda13", "base-cuda12", "base-cpu"]
}

group "framework" {
  targets = ["framework-cuda13", "framework-cuda12", "framework-cpu"]
}

group "local" {
  targets = ["operator-local", "base-local", "framework-local"]
}

target "_common" {
  context = "."
  platforms = ["linux/amd64"]
  labels = {
    "org.opencontainers.image.source"  = "https://github.com/hyperframe-dev/hyperframe"
    "org.opencontainers.image.version" = "0.1.0"
    "org.opencontainers.image.vendor"  = "HyperFrame"
  }
}

target "operator" {
  inherits = ["_common"]
  dockerfile = "images/operator.Dockerfile"
  contexts = {
    "wheelhouse" = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"        = "python:3.12-slim-bookworm@sha256:a116514e19457bcb7af7efe9c3dd0b9b71e85b317694e7882a1c52aa15a78134"
    "HF_PYTHON_VERSION" = "3.12"
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-operator:0.1.0"]
}

target "base-cuda13" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.base"
  args = {
    "BASE_IMAGE"        = "nvidia/cuda:13.0.3-base-ubuntu24.04@sha256:7c7413a56200486f71f181cad9310f6fd31b6bb21816ade15fc9c1e1e927a5c1"
    "HF_BASE_NAME"      = "nvidia/cuda:13.0.3-base-ubuntu24.04"
    "HF_BASE_DIGEST"    = "sha256:7c7413a56200486f71f181cad9310f6fd31b6bb21816ade15fc9c1e1e927a5c1"
    "HF_PROFILE"        = "cuda13"
    "HF_OS"             = "ubuntu24.04"
    "HF_CUDA"           = "13.0.3"
    "HF_PYTHON_VERSION" = "3.12"
    "HF_OS_PACKAGES"    = "python3 python3-venv"
    "HF_RDMA_PACKAGES"  = "rdma-core=50.0-2ubuntu0.2 libibverbs1=50.0-2ubuntu0.2 ibverbs-providers=50.0-2ubuntu0.2 ibverbs-utils=50.0-2ubuntu0.2"
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-base:0.1.0-cuda13.0.3-ubuntu24.04-py3.12"]
}

target "framework-cuda13" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.framework"
  contexts = {
    "hyperframe-base" = "target:base-cuda13"
    "wheelhouse"      = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"         = "hyperframe-base"
    "HF_PROFILE"         = "cuda13"
    "HF_PYTHON_VERSION"  = "3.12"
    "HF_TORCH_VERSION"   = "2.13.0"
    "HF_TORCH_VARIANT"   = "cu130"
    "HF_TORCH_CUDA"      = "13.0"
    "HF_TORCH_INDEX_URL" = "https://pypi.org/simple"
    "HF_NCCL_VERSION"    = "2.29.7"
    "HF_UID"             = "10001"
    "HF_VERSION"         = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-framework:0.1.0-torch2.13.0-cu130-py3.12"]
}

target "base-cuda12" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.base"
  args = {
    "BASE_IMAGE"        = "nvidia/cuda:12.9.1-base-ubuntu24.04@sha256:29e5e3425e2e0f5a4e97c9fb4695ba4887cd78210a43cf94c3bcafc6ab01c5e6"
    "HF_BASE_NAME"      = "nvidia/cuda:12.9.1-base-ubuntu24.04"
    "HF_BASE_DIGEST"    = "sha256:29e5e3425e2e0f5a4e97c9fb4695ba4887cd78210a43cf94c3bcafc6ab01c5e6"
    "HF_PROFILE"        = "cuda12"
    "HF_OS"             = "ubuntu24.04"
    "HF_CUDA"           = "12.9.1"
    "HF_PYTHON_VERSION" = "3.12"
    "HF_OS_PACKAGES"    = "python3 python3-venv"
    "HF_RDMA_PACKAGES"  = "rdma-core=50.0-2ubuntu0.2 libibverbs1=50.0-2ubuntu0.2 ibverbs-providers=50.0-2ubuntu0.2 ibverbs-utils=50.0-2ubuntu0.2"
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-base:0.1.0-cuda12.9.1-ubuntu24.04-py3.12"]
}

target "framework-cuda12" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.framework"
  contexts = {
    "hyperframe-base" = "target:base-cuda12"
    "wheelhouse"      = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"         = "hyperframe-base"
    "HF_PROFILE"         = "cuda12"
    "HF_PYTHON_VERSION"  = "3.12"
    "HF_TORCH_VERSION"   = "2.13.0"
    "HF_TORCH_VARIANT"   = "cu129"
    "HF_TORCH_CUDA"      = "12.9"
    "HF_TORCH_INDEX_URL" = "https://download.pytorch.org/whl/cu129"
    "HF_NCCL_VERSION"    = "2.29.7"
    "HF_UID"             = "10001"
    "HF_VERSION"         = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-framework:0.1.0-torch2.13.0-cu129-py3.12"]
}

target "base-cpu" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.base"
  args = {
    "BASE_IMAGE"        = "python:3.12-slim-bookworm@sha256:a116514e19457bcb7af7efe9c3dd0b9b71e85b317694e7882a1c52aa15a78134"
    "HF_BASE_NAME"      = "python:3.12-slim-bookworm"
    "HF_BASE_DIGEST"    = "sha256:a116514e19457bcb7af7efe9c3dd0b9b71e85b317694e7882a1c52aa15a78134"
    "HF_PROFILE"        = "cpu"
    "HF_OS"             = "debian12"
    "HF_CUDA"           = "none"
    "HF_PYTHON_VERSION" = "3.12"
    "HF_OS_PACKAGES"    = ""
    "HF_RDMA_PACKAGES"  = ""
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-base:0.1.0-debian12-py3.12"]
}

target "framework-cpu" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.framework"
  contexts = {
    "hyperframe-base" = "target:base-cpu"
    "wheelhouse"      = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"         = "hyperframe-base"
    "HF_PROFILE"         = "cpu"
    "HF_PYTHON_VERSION"  = "3.12"
    "HF_TORCH_VERSION"   = "2.13.0"
    "HF_TORCH_VARIANT"   = "cpu"
    "HF_TORCH_CUDA"      = "none"
    "HF_TORCH_INDEX_URL" = "https://download.pytorch.org/whl/cpu"
    "HF_NCCL_VERSION"    = "none"
    "HF_UID"             = "10001"
    "HF_VERSION"         = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-framework:0.1.0-torch2.13.0-cpu-py3.12"]
}

target "rootfs-local" {
  context = ROOTFS_LOCAL_DIR
  dockerfile-inline = "FROM scratch\nADD rootfs.tar /\n"
  platforms = ["linux/amd64"]
}

target "operator-local" {
  inherits = ["_common"]
  dockerfile = "images/operator.Dockerfile"
  contexts = {
    "hyperframe-rootfs-local" = "target:rootfs-local"
    "wheelhouse"              = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"        = "hyperframe-rootfs-local"
    "HF_PYTHON_VERSION" = "3.11"
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
    "PIP_NO_INDEX"      = "1"
    "PIP_FIND_LINKS"    = "/wheelhouse"
  }
  tags = ["${REGISTRY}/hyperframe-operator:0.1.0-local"]
}

target "base-local" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.base"
  contexts = {
    "hyperframe-rootfs-local" = "target:rootfs-local"
  }
  args = {
    "BASE_IMAGE"        = "hyperframe-rootfs-local"
    "HF_BASE_NAME"      = "debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates bookworm ROOTFS http://deb.debian.org/debian"
    "HF_BASE_DIGEST"    = "sha256:${ROOTFS_LOCAL_SHA256}"
    "HF_PROFILE"        = "local"
    "HF_OS"             = "debian12"
    "HF_CUDA"           = "none"
    "HF_PYTHON_VERSION" = "3.11"
    "HF_OS_PACKAGES"    = "python3 python3-venv"
    "HF_RDMA_PACKAGES"  = ""
    "HF_USER"           = "hyperframe"
    "HF_UID"            = "10001"
    "HF_VERSION"        = "0.1.0"
  }
  tags = ["${REGISTRY}/hyperframe-base:0.1.0-debian12-py3.11"]
}

target "framework-local" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.framework"
  contexts = {
    "hyperframe-base" = "target:base-local"
    "wheelhouse"      = "${WHEELHOUSE}"
  }
  args = {
    "BASE_IMAGE"         = "hyperframe-base"
    "HF_PROFILE"         = "local"
    "HF_PYTHON_VERSION"  = "3.11"
    "HF_TORCH_VERSION"   = "2.13.0"
    "HF_TORCH_VARIANT"   = "cu130"
    "HF_TORCH_CUDA"      = "13.0"
    "HF_TORCH_INDEX_URL" = "https://pypi.org/simple"
    "HF_NCCL_VERSION"    = "2.29.7"
    "HF_UID"             = "10001"
    "HF_VERSION"         = "0.1.0"
    "PIP_NO_INDEX"       = "1"
    "PIP_FIND_LINKS"     = "/wheelhouse"
  }
  tags = ["${REGISTRY}/hyperframe-framework:0.1.0-torch2.13.0-cu130-py3.11"]
}
