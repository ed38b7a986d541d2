# mjfast_add_plugin(<target> <sources>...): a MODULE library of native mjfast plugins, C++17, with
# mjfast's plugin headers and mujoco's include directory, linked to libmujoco (imported target
# mujoco::mujoco, which the caller or mjfastConfig.cmake defines) with a RUNPATH that finds the
# mujoco package from the usual install places (next to site-packages/<pkg>/ or one level deeper).
# Expects mjfast_INCLUDE_DIR to name the directory that holds mjfast/plugin.hpp.
include_guard(GLOBAL)

if(NOT TARGET mjfast::plugin_sdk)
  add_library(mjfast::plugin_sdk INTERFACE IMPORTED)
  set_target_properties(mjfast::plugin_sdk PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${mjfast_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES mujoco::mujoco)
endif()

function(mjfast_add_plugin target)
  if(NOT ARGN)
    message(FATAL_ERROR "mjfast_add_plugin(${target}) needs at least one source file")
  endif()
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE mjfast::plugin_sdk)
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden  # only the MJFAST_PLUGIN entry functions are exported
    VISIBILITY_INLINES_HIDDEN ON
    PREFIX "lib"
    INSTALL_RPATH "$ORIGIN/../mujoco;$ORIGIN/../../mujoco"
    BUILD_WITH_INSTALL_RPATH ON)
  target_link_options(${target} PRIVATE "LINKER:--enable-new-dtags")
endfunction()
