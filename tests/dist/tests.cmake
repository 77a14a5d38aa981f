# Distributed-job tests (included from the top-level CMakeLists.txt after the
# kafka tests). test_broker_*.py run `looptune worker` processes and `looptune
# submit` against the real broker of the kafka_broker fixture
# (tests/kafka/tests.cmake); test_cli_*.py check the commands' errors and need
# no broker.
if(PYTHON3 AND NOT LT_SANITIZE)
  set(LT_DIST_ENV "LT_BIN=$<TARGET_FILE:looptune_cli>;LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto;LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork;PYTHONPATH=${CMAKE_SOURCE_DIR}/tests/dist")
  file(GLOB dist_broker_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/dist/test_broker_*.py)
  foreach(t ${dist_broker_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS kafka TIMEOUT 600
      FIXTURES_REQUIRED kafka_broker ENVIRONMENT "${LT_KAFKA_ENV};${LT_DIST_ENV}")
  endforeach()
  file(GLOB dist_cli_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/dist/test_cli_*.py)
  foreach(t ${dist_cli_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS e2e TIMEOUT 120
      ENVIRONMENT "${LT_DIST_ENV}")
  endforeach()
endif()
