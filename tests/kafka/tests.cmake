# Kafka tests (included from the top-level CMakeLists.txt after the per-folder
# test loop). Tests named test_broker_* and the Python reader run against a
# real Apache Kafka broker: the kafka_broker_start fixture starts one with
# scripts/kafka/broker.sh before them and kafka_broker_stop stops it after
# them, even when they fail. The bootstrap address reaches the tests through
# the file named by LT_KAFKA_BOOTSTRAP_FILE; LT_KAFKA_BOOTSTRAP in the
# environment (a broker of your own) takes precedence.
set(LT_KAFKA_RUN_DIR ${CMAKE_BINARY_DIR}/kafka-broker)
set(LT_KAFKA_ENV "LT_KAFKA_BOOTSTRAP_FILE=${LT_KAFKA_RUN_DIR}/bootstrap")
add_test(NAME kafka_broker_start
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/kafka/broker.sh start --dir ${LT_KAFKA_RUN_DIR})
add_test(NAME kafka_broker_stop
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/kafka/broker.sh stop --dir ${LT_KAFKA_RUN_DIR})
set_tests_properties(kafka_broker_start PROPERTIES FIXTURES_SETUP kafka_broker LABELS kafka
  TIMEOUT 900)
set_tests_properties(kafka_broker_stop PROPERTIES FIXTURES_CLEANUP kafka_broker LABELS kafka
  TIMEOUT 60)

file(GLOB kafka_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/kafka/test_*.c)
foreach(t ${kafka_tests})
  get_filename_component(name ${t} NAME_WE)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ${LT_KAFKA_ENV})
endforeach()
# test_broker_* of any layer needs the real broker (and is labelled kafka).
file(GLOB broker_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/*/test_broker_*.c)
foreach(t ${broker_tests})
  get_filename_component(name ${t} NAME_WE)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ${LT_KAFKA_ENV})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED kafka_broker LABELS kafka)
endforeach()

# kafka_samples produces one record of every message kind and prints each as
# JSON; the Python test reads them back from the broker with the .proto alone.
add_executable(kafka_samples ${CMAKE_SOURCE_DIR}/tests/kafka/kafka_samples.c)
target_include_directories(kafka_samples PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(kafka_samples PRIVATE looptune)
if(PYTHON3 AND NOT LT_SANITIZE)
  lt_add_pytests(tests/kafka/test_proto_python.py LABEL kafka TIMEOUT 300 BROKER
    ENV "LT_KAFKA_SAMPLES=$<TARGET_FILE:kafka_samples>" "LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto"
        "LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork")
endif()

# A run's telemetry, produced by `looptune run --telemetry kafka` and decoded
# in Python with the .proto alone.
if(PYTHON3 AND NOT LT_SANITIZE)
  lt_add_pytests(tests/kafka/test_tel_python.py LABEL kafka TIMEOUT 300 BROKER
    ENV "LT_BIN=$<TARGET_FILE:looptune_cli>" "LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto"
        "LT_DATA_DIR=${LT_DATA_DIR}" "LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork")
endif()

# The closed loop: `looptune optimizer` and `looptune run --tune online`
# against the real broker, decoded in Python with the .proto alone.
if(PYTHON3 AND NOT LT_SANITIZE)
  lt_add_pytests(tests/optimizer/test_broker_*.py LABEL kafka TIMEOUT 900 BROKER
    ENV "LT_BIN=$<TARGET_FILE:looptune_cli>" "LT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto"
        "LT_WORK_DIR=${CMAKE_BINARY_DIR}/testwork")
endif()
