# Hyperparameter-search tests in Python (included from the top-level
# CMakeLists.txt): test_cli_*.py run `looptune hpo` with small Python scripts
# or built-in objectives; no broker but the embedded one (the default
# without --brokers; the other tests pass --no-broker). test_broker_hpo*.py
# run `looptune hpo --brokers` with `looptune worker`s on the real broker of
# the kafka_broker fixture (tests/kafka/tests.cmake), through tests/dist's
# harness.
if(PYTHON3 AND NOT LT_SANITIZE)
  lt_add_pytests(tests/hpo/test_cli_*.py LABEL e2e TIMEOUT 300
    ENV "LT_BIN=$<TARGET_FILE:looptune_cli>" "LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork")
  lt_add_pytests(tests/hpo/test_broker_hpo*.py LABEL kafka TIMEOUT 600 ENV ${LT_DIST_ENV} BROKER)
endif()
