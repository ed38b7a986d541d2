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
include("${CMAKE_CURRENT_LIST_DIR}/mjfastMujoco.cmake")

include("${CMAKE_CURRENT_LIST_DIR}/mjfastPlugin.cmake")
set(mjfast_FOUND TRUE)
