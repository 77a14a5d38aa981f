# Gateway tests (included from the top-level CMakeLists.txt after the serve
# tests): test_broker_gateway*.py run `looptune serve` and `looptune
# gateway` against the real broker of the kafka_broker fixture and drive
# the gateway with the official openai client (tests/serve/serve_client.py
# for the worker and the references).
if(PYTHON3 AND NOT LT_SANITIZE)
  file(GLOB http_broker_pytests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/http/test_broker_*.py)
  foreach(t ${http_broker_pytests})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME py_${name} COMMAND ${PYTHON3} ${t})
    set_tests_properties(py_${name} PROPERTIES LABELS kafka TIMEOUT 300
      FIXTURES_REQUIRED kafka_broker ENVIRONMENT "${LT_KAFKA_ENV};${LT_SERVE_ENV}")
  endforeach()
  # without a broker: `serve --http` on the embedded one, the command lines
  add_test(NAME py_test_http_embedded COMMAND ${PYTHON3} ${CMAKE_SOURCE_DIR}/tests/http/test_http_embedded.py)
  set_tests_properties(py_test_http_embedded PROPERTIES LABELS e2e TIMEOUT 300
    ENVIRONMENT "${LT_SERVE_ENV}")
endif()
