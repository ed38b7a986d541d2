# Imports libmujoco of the mujoco Python package as mujoco::mujoco, and sets MUJOCO_VERSION and
# MUJOCO_PACKAGE_DIR. The mujoco wheel ships headers and libmujoco.so.<version> but no CMake
# config: the Python interpreter (Python_EXECUTABLE) that has it says where it is. Used by
# mjfast's own build and by mjfastConfig.cmake, so native plugins link the very same library.
include_guard(GLOBAL)

if(NOT TARGET mujoco::mujoco)
  if(NOT Python_EXECUTABLE)
    find_package(Python REQUIRED COMPONENTS Interpreter)
  endif()
  # MJFAST_PYTHON_FLAGS: what a plugin package's CMakeLists.txt needed to import mjfast (-E
  # under pip's build isolation); the same interpreter then finds the same mujoco.
  execute_process(
    COMMAND "${Python_EXECUTABLE}" ${MJFAST_PYTHON_FLAGS} -c
            "import mujoco, os; print(os.path.dirname(mujoco.__file__)); print(mujoco.__version__)"
    OUTPUT_VARIABLE _mjfast_mujoco_probe
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mjfast_mujoco_result)
  if(NOT _mjfast_mujoco_result EQUAL 0)
    message(FATAL_ERROR "mjfast needs the mujoco Python package: ${Python_EXECUTABLE} cannot "
                        "import mujoco (pip install mujoco)")
  endif()
  string(REPLACE "\n" ";" _mjfast_mujoco_probe "${_mjfast_mujoco_probe}")
  list(GET _mjfast_mujoco_probe 0 MUJOCO_PACKAGE_DIR)
  list(GET _mjfast_mujoco_probe 1 MUJOCO_VERSION)
  set(_mjfast_mujoco_library "${MUJOCO_PACKAGE_DIR}/libmujoco.so.${MUJOCO_VERSION}")
  if(NOT EXISTS "${_mjfast_mujoco_library}")
    message(FATAL_ERROR "mujoco ${MUJOCO_VERSION} has no ${_mjfast_mujoco_library}")
  endif()
  add_library(mujoco::mujoco SHARED IMPORTED)
  set_target_properties(mujoco::mujoco PROPERTIES
    IMPORTED_LOCATION "${_mjfast_mujoco_library}"
    INTERFACE_INCLUDE_DIRECTORIES "${MUJOCO_PACKAGE_DIR}/include")
  message(STATUS "mjfast: mujoco ${MUJOCO_VERSION} at ${MUJOCO_PACKAGE_DIR}")
endif()
