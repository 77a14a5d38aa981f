# The kafka layer's dependencies: librdkafka, and protobuf-c for the wire
# schema, which protoc-c compiles at build time into the build tree (generated
# code is never committed). Sets LT_KAFKA_LIBS and LT_GEN_DIR and appends the
# generated source to LT_SOURCES.
find_package(PkgConfig)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(RDKAFKA IMPORTED_TARGET rdkafka)
  pkg_check_modules(PROTOBUFC IMPORTED_TARGET libprotobuf-c)
endif()
if(RDKAFKA_FOUND AND PROTOBUFC_FOUND)
  set(LT_KAFKA_LIBS PkgConfig::RDKAFKA PkgConfig::PROTOBUFC)
else()
  find_path(RDKAFKA_INCLUDE librdkafka/rdkafka.h)
  find_library(RDKAFKA_LIB rdkafka)
  find_path(PROTOBUFC_INCLUDE protobuf-c/protobuf-c.h)
  find_library(PROTOBUFC_LIB protobuf-c)
  if(NOT RDKAFKA_INCLUDE OR NOT RDKAFKA_LIB OR NOT PROTOBUFC_INCLUDE OR NOT PROTOBUFC_LIB)
    message(FATAL_ERROR "librdkafka and protobuf-c are needed: run scripts/deps.sh")
  endif()
  set(LT_KAFKA_LIBS ${RDKAFKA_LIB} ${PROTOBUFC_LIB})
  include_directories(${RDKAFKA_INCLUDE} ${PROTOBUFC_INCLUDE})
endif()

find_program(PROTOC_C protoc-c)
if(NOT PROTOC_C)
  message(FATAL_ERROR "protoc-c is needed to compile proto/looptune.proto: run scripts/deps.sh")
endif()
set(LT_GEN_DIR ${CMAKE_BINARY_DIR}/gen)
file(MAKE_DIRECTORY ${LT_GEN_DIR})
add_custom_command(
  OUTPUT ${LT_GEN_DIR}/looptune.pb-c.c ${LT_GEN_DIR}/looptune.pb-c.h
  COMMAND ${PROTOC_C} --c_out=${LT_GEN_DIR} --proto_path=${CMAKE_SOURCE_DIR}/proto looptune.proto
  DEPENDS ${CMAKE_SOURCE_DIR}/proto/looptune.proto
  COMMENT "protoc-c proto/looptune.proto")
# Generated code is not held to the project's warning set.
set_source_files_properties(${LT_GEN_DIR}/looptune.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
list(APPEND LT_SOURCES ${LT_GEN_DIR}/looptune.pb-c.c)
