# Distributed-job tests (included from the top-level CMakeLists.txt after the
# kafka tests). test_broker_*.py run `looptune worker` processes and `looptune
# submit` against the real broker of the kafka_broker fixture
# (tests/kafka/tests.cmake); test_cli_*.py check the commands' errors and need
# no broker.
if(PYTHON3 AND NOT LT_SANITIZE)
  set(LT_DIST_ENV "LT_BIN=$<TARGET_FILE:looptune_cli>;LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto;LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork;PYTHONPATH=${CMAKE_SOURCE_DIR}/tests/dist")
  lt_add_pytests(tests/dist/test_broker_*.py LABEL kafka TIMEOUT 600 ENV ${LT_DIST_ENV} BROKER)
  lt_add_pytests(tests/dist/test_cli_*.py LABEL e2e TIMEOUT 120 ENV ${LT_DIST_ENV})
endif()
