# cmake -DDEPS_FILE=<build>/mixlab_area_deps.txt -DSOURCE_DIR=<repo> -P check_layering.cmake
#
# Fails when a header or source of an area includes a mixlab header from an area outside its
# dependency closure (its DEPS in CMakeLists.txt, transitively), i.e. when code reaches "up" the
# stack or sideways past what it links. Checks include/mixlab/<area>/, src/<area>/ and
# tests/<area>/ (a test executable links only its area). Also fails when a folder under src/ or
# include/mixlab/ is not a declared area, so a new area cannot skip the check.
cmake_minimum_required(VERSION 3.22)
if(NOT DEPS_FILE OR NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering: pass -DDEPS_FILE=... and -DSOURCE_DIR=...")
endif()
file(STRINGS ${DEPS_FILE} lines)
set(areas "")
foreach(line ${lines})
  string(REGEX MATCH "^([a-z_]+):(.*)$" _ "${line}")
  set(area ${CMAKE_MATCH_1})
  string(STRIP "${CMAKE_MATCH_2}" deps)
  string(REPLACE " " ";" deps "${deps}")
  list(APPEND areas ${area})
  set(direct_${area} ${deps})
endforeach()

# Transitive closure, in declaration order (an area's DEPS are declared before it).
foreach(area ${areas})
  set(closure_${area} ${area})
  foreach(dep ${direct_${area}})
    if(NOT dep IN_LIST areas)
      message(FATAL_ERROR "check_layering: area '${area}' depends on undeclared area '${dep}'")
    endif()
    list(APPEND closure_${area} ${closure_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES closure_${area})
endforeach()

set(violations "")
foreach(root src include/mixlab)
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${SOURCE_DIR}/${root} ${SOURCE_DIR}/${root}/*)
  foreach(child ${children})
    if(IS_DIRECTORY ${SOURCE_DIR}/${root}/${child} AND NOT child IN_LIST areas)
      string(APPEND violations "  ${root}/${child}/ is not an area declared with mixlab_add_area\n")
    endif()
  endforeach()
endforeach()

set(checked 0)
foreach(area ${areas})
  file(GLOB_RECURSE files ${SOURCE_DIR}/include/mixlab/${area}/*.h ${SOURCE_DIR}/src/${area}/*.h
       ${SOURCE_DIR}/src/${area}/*.cpp ${SOURCE_DIR}/tests/${area}/*.h ${SOURCE_DIR}/tests/${area}/*.cpp)
  foreach(f ${files})
    math(EXPR checked "${checked} + 1")
    file(STRINGS ${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]mixlab/[a-z_]+/")
    foreach(inc ${includes})
      string(REGEX MATCH "mixlab/([a-z_]+)/" _ "${inc}")
      set(target ${CMAKE_MATCH_1})
      if(NOT target IN_LIST closure_${area})
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
        string(REPLACE ";" " " allowed "${closure_${area}}")
        string(APPEND violations "  ${rel}: includes mixlab/${target}/, outside area '${area}' (may use: ${allowed})\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "layering violations (fix the include or the area's DEPS in CMakeLists.txt):\n${violations}")
endif()
list(LENGTH areas n_areas)
message(STATUS "layering: ${checked} files in ${n_areas} areas respect their DEPS")
