# CMake package of mjfast's native plugin SDK:
#   execute_process(COMMAND python -c "import mjfast; print(mjfast.get_cmake_dir())" ...)
#   find_package(mjfast CONFIG REQUIRED)        # with mjfast_DIR set to that directory
#   mjfast_add_plugin(my_plugins src/my_plugin.cc)
# Provides mjfast::plugin_sdk (the headers), mujoco::mujoco (libmujoco of the mujoco Python package
# mjfast runs with, found through Python as mjfast's own build does) and mjfast_add_plugin().
include_guard(GLOBAL)

get_filename_component(_mjfast_package_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(mjfast_INCLUDE_DIR "${_mjfast_package_dir}/include")
if(NOT EXISTS "${mjfast_INCLUDE_DIR}/mjfast/plugin_abi.h")
  set(mjfast_FOUND FALSE)
  set(mjfast_NOT_FOUND_MESSAGE "mjfast headers not found under ${mjfast_INCLUDE_DIR}")
  return()
endif()

# The mujoco package: the Python interpreter that has mjfast knows where it is.
if(NOT TARGET mujoco::mujoco)
  if(NOT Python_EXECUTABLE)
    find_package(Python REQUIRED COMPONENTS Interpreter)
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
            "import mujoco, os; print(os.path.dirname(mujoco.__file__)); print(mujoco.__version__)"
    OUTPUT_VARIABLE _mjfast_mujoco_probe
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mjfast_mujoco_result)
  if(NOT _mjfast_mujoco_result EQUAL 0)
    message(FATAL_ERROR "mjfast: ${Python_EXECUTABLE} cannot import mujoco")
  endif()
  string(REPLACE "\n" ";" _mjfast_mujoco_probe "${_mjfast_mujoco_probe}")
  list(GET _mjfast_mujoco_probe 0 MUJOCO_PACKAGE_DIR)
  list(GET _mjfast_mujoco_probe 1 MUJOCO_VERSION)
  set(MUJOCO_LIBRARY "${MUJOCO_PACKAGE_DIR}/libmujoco.so.${MUJOCO_VERSION}")
  if(NOT EXISTS "${MUJOCO_LIBRARY}")
    message(FATAL_ERROR "mjfast: mujoco ${MUJOCO_VERSION} has no ${MUJOCO_LIBRARY}")
  endif()
  add_library(mujoco::mujoco SHARED IMPORTED)
  set_target_properties(mujoco::mujoco PROPERTIES
    IMPORTED_LOCATION "${MUJOCO_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MUJOCO_PACKAGE_DIR}/include")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/mjfastPlugin.cmake")
set(mjfast_FOUND TRUE)
