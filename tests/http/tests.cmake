# Gateway tests (included from the top-level CMakeLists.txt after the serve
# tests): test_broker_gateway*.py run `looptune serve` and `looptune
# gateway` against the real broker of the kafka_broker fixture and drive
# the gateway with the official openai client (tests/serve/serve_client.py
# for the worker and the references).
if(PYTHON3 AND NOT LT_SANITIZE)
  lt_add_pytests(tests/http/test_broker_*.py LABEL kafka TIMEOUT 300 ENV ${LT_SERVE_ENV} BROKER)
  # without a broker: `serve --http` on the embedded one, the command lines
  lt_add_pytests(tests/http/test_http_embedded.py LABEL e2e TIMEOUT 300 ENV ${LT_SERVE_ENV})
endif()
