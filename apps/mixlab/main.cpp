#include <iostream>
int main() { std::cout << "mixlab\n"; }
