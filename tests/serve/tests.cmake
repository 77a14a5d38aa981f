# Stream-inference tests (included from the top-level CMakeLists.txt after the
# dist tests). test_broker_serve*.py run `looptune serve` processes against the
# real broker of the kafka_broker fixture (tests/kafka/tests.cmake) with the
# client in serve_client.py, and compare with `looptune run`; test_cli_*.py
# check the command's errors and need no broker.
if(PYTHON3 AND NOT LT_SANITIZE)
  set(LT_SERVE_ENV "LT_BIN=$<TARGET_FILE:looptune_cli>;LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto;LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork;LT_DATA_DIR=${LT_DATA_DIR};PYTHONPATH=${CMAKE_SOURCE_DIR}/tests/serve:${CMAKE_SOURCE_DIR}/tests/dist")
  lt_add_pytests(tests/serve/test_broker_*.py LABEL kafka TIMEOUT 300 ENV ${LT_SERVE_ENV} BROKER)
  lt_add_pytests(tests/serve/test_cli_*.py LABEL e2e TIMEOUT 120 ENV ${LT_SERVE_ENV})
endif()
