// python/bindings.h — the binding functions of the module's translation units, called once from
// PYBIND11_MODULE in mixlab_py.cpp (one file per concept: kernels and mixers there, the model
// and its checkpoints in mixlab_py_model.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mixlab::python {

/// mixlab._mixlab._Model, _model_from_config, _model_load, ModelState (mixlab_py_model.cpp).
void bind_model(pybind11::module_& m);

}  // namespace mixlab::python
