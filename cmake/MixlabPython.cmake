# Finds what the Python module `mixlab` (python/) needs and sets MIXLAB_PYTHON (default: ON when
# all of it is found and the build is not sanitised). Included before any target is declared,
# because the module is a shared object: every area it links must then be compiled
# position-independent (see CMakeLists.txt).
#
# The interpreter is Debian's /usr/bin/python3 unless Python_EXECUTABLE is given: the module must
# load into the interpreter whose `torch` is the LibTorch mixlab links (python3-torch is built on
# libtorch-dev's libraries), and a python3 earlier on PATH (pyenv, conda) has another torch or none.
set(MIXLAB_PYTHON_FOUND OFF)
set(MIXLAB_PYTHON_WHY "")
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Interpreter the mixlab Python module is built for")
endif()
find_package(Python 3.8 COMPONENTS Interpreter Development.Module QUIET)
if(NOT Python_FOUND)
  set(MIXLAB_PYTHON_WHY "no Python interpreter with development headers (apt-get install python3-dev)")
else()
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
  # libtorch_python: torch's own pybind11 type casters for at::Tensor (torch/python.h).
  find_library(MIXLAB_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
  execute_process(COMMAND ${Python_EXECUTABLE} -c "import torch, os; print(os.path.realpath(torch.__file__))"
                  RESULT_VARIABLE torch_rc OUTPUT_VARIABLE torch_py ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT pybind11_FOUND)
    set(MIXLAB_PYTHON_WHY "pybind11 not found (apt-get install pybind11-dev)")
  elseif(NOT torch_rc EQUAL 0)
    set(MIXLAB_PYTHON_WHY "${Python_EXECUTABLE} cannot import torch (apt-get install python3-torch)")
  elseif(NOT MIXLAB_TORCH_PYTHON_LIBRARY)
    set(MIXLAB_PYTHON_WHY "libtorch_python not found next to LibTorch")
  else()
    set(MIXLAB_PYTHON_FOUND ON)
  endif()
endif()

set(mixlab_python_default OFF)
if(MIXLAB_PYTHON_FOUND AND NOT MIXLAB_SANITIZE)
  set(mixlab_python_default ON)  # an ASan module would need libasan preloaded into python
endif()
option(MIXLAB_PYTHON "Build the Python module mixlab (pybind11, python3-torch)" ${mixlab_python_default})
if(MIXLAB_PYTHON AND NOT MIXLAB_PYTHON_FOUND)
  message(FATAL_ERROR "MIXLAB_PYTHON=ON but ${MIXLAB_PYTHON_WHY}")
endif()
if(MIXLAB_PYTHON)
  message(STATUS "mixlab: Python module for ${Python_EXECUTABLE} (torch at ${torch_py})")
elseif(NOT MIXLAB_PYTHON_FOUND)
  message(STATUS "mixlab: Python module not built: ${MIXLAB_PYTHON_WHY}")
endif()
