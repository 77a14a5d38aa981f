# Hyperparameter-search tests in Python (included from the top-level
# CMakeLists.txt): test_cli_*.py run `looptune hpo` with small Python scripts
# or built-in objectives; no broker but the embedded one (the default
# without --brokers; the other tests pass --no-broker).
if(PYTHON3 AND NOT LT_SANITIZE)
  file(GLOB hpo_cli_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/hpo/test_cli_*.py)
  foreach(t ${hpo_cli_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS e2e TIMEOUT 300
      ENVIRONMENT "LT_BIN=$<TARGET_FILE:looptune_cli>;LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork")
  endforeach()
endif()

# test_broker_hpo*.py: `looptune hpo --brokers` with `looptune worker`s on the
# real broker of the kafka_broker fixture (tests/kafka/tests.cmake), through
# tests/dist's harness.
if(PYTHON3 AND NOT LT_SANITIZE)
  file(GLOB hpo_broker_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/hpo/test_broker_hpo*.py)
  foreach(t ${hpo_broker_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS kafka TIMEOUT 600
      FIXTURES_REQUIRED kafka_broker ENVIRONMENT "${LT_KAFKA_ENV};${LT_DIST_ENV}")
  endforeach()
endif()
