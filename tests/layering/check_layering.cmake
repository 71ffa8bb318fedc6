# check_layering.cmake: checks that a module's include folders reach only the modules it links.
# It compiles one-line probes with the include folders the module's own sources get: the headers
# of modules it does not link must be "not found", and those it may use must compile (the
# control: the probes do compile, so a failure of the others means "not found").
#   cmake -DCC=<compiler> -DMODULE=<name> -DINCS=<dir|dir...> -DDEFS=<def|def...>
#         -DDENY=<hdr|hdr...> -DALLOW=<hdr|hdr...> -DSRC=<source root> -DWORK=<dir> -P this
# With -DSCAN=<source root> alone it checks instead that no file under src/ includes a parent
# folder ("../"): the quoted-include search starts beside the including file, so such a path
# would step around the include folders.
cmake_minimum_required(VERSION 3.20)

if(DEFINED SCAN)
  file(GLOB_RECURSE files ${SCAN}/src/*.c ${SCAN}/src/*.h ${SCAN}/src/*.cu ${SCAN}/src/*.cuh)
  set(bad "")
  foreach(f ${files})
    file(STRINGS ${f} hits REGEX "^[ \t]*#[ \t]*include[ \t]*\"\\.\\./")
    if(hits)
      string(APPEND bad "\n  ${f}: ${hits}")
    endif()
  endforeach()
  list(LENGTH files n)
  if(n EQUAL 0)
    message(FATAL_ERROR "no sources found under ${SCAN}/src")
  endif()
  if(bad)
    message(FATAL_ERROR "includes of a parent folder (name the module instead):${bad}")
  endif()
  message(STATUS "${n} files under src/: none includes a parent folder")
  return()
endif()

foreach(v CC MODULE INCS DENY ALLOW SRC WORK)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "check_layering.cmake: -D${v}= is required")
  endif()
endforeach()
# Lists come in joined with | (a ; would split the argument on its way through ctest).
string(REPLACE "|" ";" incs "${INCS}")
string(REPLACE "|" ";" defs "${DEFS}")
string(REPLACE "|" ";" deny "${DENY}")
string(REPLACE "|" ";" allow "${ALLOW}")
set(flags -std=c11 -fsyntax-only -Wall -Wextra -Werror)
foreach(d ${incs})
  list(APPEND flags -I${d})
endforeach()
foreach(d ${defs})
  list(APPEND flags -D${d})
endforeach()
file(MAKE_DIRECTORY ${WORK})

# probe(HDR): rc and log of compiling a file that includes HDR (in WORK, so nothing of src/ is
# beside it).
function(probe hdr)
  string(MAKE_C_IDENTIFIER "${hdr}" id)
  set(f ${WORK}/probe_${id}.c)
  file(WRITE ${f} "/* layering probe: ${MODULE} includes ${hdr} */\n#include \"${hdr}\"\n"
                  "int layering_probe;\n")
  execute_process(COMMAND ${CC} ${flags} ${f} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                  ERROR_VARIABLE log)
  set(rc "${rc}" PARENT_SCOPE)
  set(log "${log}" PARENT_SCOPE)
endfunction()

set(failed 0)
foreach(h ${allow})
  probe(${h})
  if(rc EQUAL 0)
    message(STATUS "ok: ${MODULE} may include ${h}, and it compiles")
  else()
    message(SEND_ERROR "${MODULE} should reach ${h}, but the probe failed:\n${log}")
    set(failed 1)
  endif()
endforeach()
foreach(h ${deny})
  # A header that does not exist would be "not found" anywhere: the case would prove nothing.
  if(NOT EXISTS ${SRC}/src/${h})
    message(SEND_ERROR "src/${h} does not exist: this case cannot show a layering failure")
    set(failed 1)
    continue()
  endif()
  probe(${h})
  string(REGEX MATCH "No such file or directory|file not found" not_found "${log}")
  string(FIND "${log}" "${h}" named)
  if(NOT rc EQUAL 0 AND not_found AND named GREATER -1)
    message(STATUS "ok: ${MODULE} cannot include ${h} (not found)")
  elseif(rc EQUAL 0)
    message(SEND_ERROR "${MODULE} reaches ${h}, a module it does not link: the layering leaks")
    set(failed 1)
  else()
    message(SEND_ERROR "${MODULE} including ${h} failed, but not as 'not found':\n${log}")
    set(failed 1)
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "layering of ${MODULE}: see above")
endif()
