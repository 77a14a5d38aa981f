# lt_add_pytests(<glob under the source tree> LABEL <label> TIMEOUT <s> ENV <list>
#                [BROKER])
# One ctest test py_<name> per Python file the glob matches, run by python3
# with the environment ENV; BROKER: it needs the real Kafka broker of the
# kafka_broker fixture (tests/kafka/tests.cmake), whose address it is given.
function(lt_add_pytests pattern)
  cmake_parse_arguments(PT "BROKER" "LABEL;TIMEOUT" "ENV" ${ARGN})
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${pattern})
  set(env ${PT_ENV})
  if(PT_BROKER)
    list(PREPEND env ${LT_KAFKA_ENV})
  endif()
  foreach(t ${files})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS ${PT_LABEL} TIMEOUT ${PT_TIMEOUT}
      ENVIRONMENT "${env}")
    if(PT_BROKER)
      set_tests_properties(py_${name} PROPERTIES FIXTURES_REQUIRED kafka_broker)
    endif()
  endforeach()
endfunction()
