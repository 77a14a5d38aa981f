# Stream-inference tests (included from the top-level CMakeLists.txt after the
# dist tests). test_broker_serve*.py run `looptune serve` processes against the
# real broker of the kafka_broker fixture (tests/kafka/tests.cmake) with the
# client in serve_client.py, and compare with `looptune run`; test_cli_*.py
# check the command's errors and need no broker.
if(PYTHON3 AND NOT LT_SANITIZE)
  set(LT_SERVE_ENV "LT_BIN=$<TARGET_FILE:looptune_cli>;LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto;LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork;LT_DATA_DIR=${LT_DATA_DIR};PYTHONPATH=${CMAKE_SOURCE_DIR}/tests/serve:${CMAKE_SOURCE_DIR}/tests/dist")
  file(GLOB serve_broker_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/serve/test_broker_*.py)
  foreach(t ${serve_broker_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS kafka TIMEOUT 300
      FIXTURES_REQUIRED kafka_broker ENVIRONMENT "${LT_KAFKA_ENV};${LT_SERVE_ENV}")
  endforeach()
  file(GLOB serve_cli_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/serve/test_cli_*.py)
  foreach(t ${serve_cli_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS e2e TIMEOUT 120
      ENVIRONMENT "${LT_SERVE_ENV}")
  endforeach()
endif()
