# One ctest entry per pytest file (named <PREFIX>/<file>), so that a failure
# names its file and `ctest -j` runs the files side by side.
#   wbkit_add_pytest_files(PREFIX cli LABEL cli DIRECTORY dir
#                          [WORKING_DIRECTORY dir] [ENVIRONMENT VAR=value ...])
# Defined here only when the top-level CMakeLists.txt does not define it.
if(NOT COMMAND wbkit_add_pytest_files)
  function(wbkit_add_pytest_files)
    cmake_parse_arguments(PYT "" "PREFIX;LABEL;DIRECTORY;WORKING_DIRECTORY" "ENVIRONMENT" ${ARGN})
    if(NOT PYT_WORKING_DIRECTORY)
      set(PYT_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    endif()
    set(python /usr/bin/python3)
    if(Python3_EXECUTABLE)
      set(python ${Python3_EXECUTABLE})
    endif()
    file(GLOB files CONFIGURE_DEPENDS ${PYT_DIRECTORY}/test_*.py)
    foreach(file ${files})
      get_filename_component(name ${file} NAME_WE)
      add_test(NAME ${PYT_PREFIX}/${name}
        COMMAND ${python} -m pytest -q -p no:cacheprovider ${file}
        WORKING_DIRECTORY ${PYT_WORKING_DIRECTORY})
      set_tests_properties(${PYT_PREFIX}/${name} PROPERTIES
        LABELS ${PYT_LABEL} TIMEOUT 900 ENVIRONMENT "${PYT_ENVIRONMENT}")
    endforeach()
  endfunction()
endif()
