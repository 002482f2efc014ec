// mixlab/version.h — the library version (kept equal to project(VERSION) in CMakeLists.txt).
#pragma once

#define MIXLAB_VERSION_MAJOR 0
#define MIXLAB_VERSION_MINOR 1
#define MIXLAB_VERSION_PATCH 0
#define MIXLAB_VERSION_STRING "0.1.0"
