// The one header through which every binding translation unit sees pybind11, so that all of
// them are compiled with the same configuration (iminuit's pybind11.hpp does the same).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
