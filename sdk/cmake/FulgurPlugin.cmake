# fulgur_add_plugin(KIND NAME SOURCES src... [LIBRARIES lib...] [INCLUDE_DIRS dir...]
#                   [OUTPUT_DIRECTORY dir] [NO_INSTALL])
# Builds fulgur-<KIND>-<NAME>.so against the SDK headers, exporting only the entry symbol.
# Works in the fulgur source tree and out of tree after find_package(Fulgur).
#
# Install: the plugin goes to ${FULGUR_PLUGIN_SUBDIR} under the install prefix (lib/fulgur/
# plugins; out of tree, FulgurConfig.cmake sets the same relative folder, so a plugin
# installed to fulgur's own prefix is found by the installed `fulgur`). Not installed:
# plugins given an OUTPUT_DIRECTORY or NO_INSTALL, and in the fulgur tree anything under
# tests/ (fixtures such as deliberately broken plugins must never reach an install).
include_guard(GLOBAL)

function(fulgur_add_plugin kind name)
  cmake_parse_arguments(P "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES;INCLUDE_DIRS" ${ARGN})
  set(target "fulgur-${kind}-${name}")
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "fulgur-${kind}-${name}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIRECTORY}")
  elseif(DEFINED FULGUR_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${FULGUR_PLUGIN_OUTPUT_DIR}")
  endif()
  if(TARGET Fulgur::sdk)
    target_link_libraries(${target} PRIVATE Fulgur::sdk)
  elseif(DEFINED FULGUR_SDK_INCLUDE_DIR)
    target_include_directories(${target} PRIVATE "${FULGUR_SDK_INCLUDE_DIR}")
  else()
    message(FATAL_ERROR "fulgur_add_plugin: no SDK found; call find_package(Fulgur) first")
  endif()
  target_include_directories(${target} PRIVATE ${P_INCLUDE_DIRS})
  target_link_libraries(${target} PRIVATE ${P_LIBRARIES})
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    # Unresolved symbols are an error at link time, not at dlopen time.
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(DEFINED FULGUR_WARNINGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${FULGUR_WARNINGS}>)
  endif()
  set(install_it ON)
  if(P_NO_INSTALL OR P_OUTPUT_DIRECTORY OR NOT DEFINED FULGUR_PLUGIN_SUBDIR)
    set(install_it OFF)
  elseif(DEFINED fulgur_SOURCE_DIR)
    string(FIND "${CMAKE_CURRENT_SOURCE_DIR}/" "${fulgur_SOURCE_DIR}/tests/" pos)
    if(pos EQUAL 0)
      set(install_it OFF)
    endif()
  endif()
  if(install_it)
    install(TARGETS ${target} LIBRARY DESTINATION "${FULGUR_PLUGIN_SUBDIR}")
  endif()
endfunction()
