# mixlab_add_area(<area> [DEPS <area>...])
# Builds src/<area>/**/*.cpp into the static library mixlab_<area>. Areas are separate libraries
# so that a test of one area links only what it needs, and an area under construction cannot
# break the build of an unrelated one.
set(MIXLAB_AREA_TARGETS "")
set(MIXLAB_AREA_NAMES "")
function(mixlab_add_area area)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${area}/*.cpp)
  if(NOT sources)
    set(sources ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(mixlab_${area} STATIC ${sources})
  add_library(mixlab::${area} ALIAS mixlab_${area})
  set_target_properties(mixlab_${area} PROPERTIES EXPORT_NAME ${area})
  target_include_directories(mixlab_${area} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # OpenMP: at::parallel_for runs in parallel only in objects compiled with -fopenmp (CMakeLists.txt).
  target_link_libraries(mixlab_${area} PUBLIC torch OpenMP::OpenMP_CXX)
  target_compile_options(mixlab_${area} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  foreach(dep ${ARG_DEPS})
    target_link_libraries(mixlab_${area} PUBLIC mixlab_${dep})
  endforeach()
  if(MIXLAB_PCH)
    target_precompile_headers(mixlab_${area} REUSE_FROM mixlab_pch)
  endif()
  set(MIXLAB_AREA_TARGETS ${MIXLAB_AREA_TARGETS} mixlab_${area} PARENT_SCOPE)
  set(MIXLAB_AREA_NAMES ${MIXLAB_AREA_NAMES} ${area} PARENT_SCOPE)
  set(MIXLAB_AREA_DEPS_${area} ${ARG_DEPS} PARENT_SCOPE)
endfunction()

# Writes one line per area, "<area>: <direct deps...>", in declaration order: the input of the
# layering check (tests/architecture/check_layering.cmake), so the check reads the same DEPS the
# build links.
function(mixlab_write_area_deps file)
  set(text "")
  foreach(area ${MIXLAB_AREA_NAMES})
    string(REPLACE ";" " " deps "${MIXLAB_AREA_DEPS_${area}}")
    string(APPEND text "${area}: ${deps}\n")
  endforeach()
  file(WRITE ${file} "${text}")
endfunction()
