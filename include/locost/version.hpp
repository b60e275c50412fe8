// locost version. CMake reads the three numbers below; keep the macro names.
#pragma once

#define LOCOST_VERSION_MAJOR 0
#define LOCOST_VERSION_MINOR 1
#define LOCOST_VERSION_PATCH 0
#define LOCOST_VERSION_STRING "0.1.0"
