// The Catch2 v2 main, compiled once (Catch2 v3 links Catch2::Catch2WithMain instead).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
