# Writes OUT, a C file defining `const unsigned char NAME[]` (NUL-terminated)
# and `const unsigned long NAME_len` with the bytes of IN.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
file(WRITE ${OUT} "/* Generated from ${IN}; do not edit. */\nconst unsigned char ${NAME}[] = {${bytes}0x00};\nconst unsigned long ${NAME}_len = ${n};\n")
