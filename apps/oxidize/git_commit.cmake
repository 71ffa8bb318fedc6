# git_commit.cmake: writes OUT (git_commit.h) with the checkout's commit for `oxidize --version`,
# at every build, touching it only when the commit (or its -dirty mark) changed.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git diff --quiet HEAD WORKING_DIRECTORY ${SRC}
                RESULT_VARIABLE dirty ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
elseif(dirty EQUAL 1)
  string(APPEND commit "-dirty")
endif()
file(WRITE ${OUT}.tmp "#define OX_GIT_COMMIT \"${commit}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
